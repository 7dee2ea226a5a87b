"""A private Postfix instance on 127.0.0.1 for tests: its own main.cf, master.cf, queue,
Maildir and log under a temporary directory, started with ``postfix -c DIR``.

The instance accepts mail for example.com and example.org into one catch-all Maildir
(the ``virtual`` agent, as ``nobody``), answers chosen recipients from an access map,
requires a fully-qualified HELO name and has a small ``message_size_limit``. Postfix
reports its own failures only to syslog (absent here), so the instance logs to
``DIR/maillog`` and ``start`` checks that ``master`` answers on the port before it
returns. Every command runs with a timeout; ``stop`` also kills what is left.
"""

from __future__ import annotations

import contextlib
import email
import email.policy
import os
import re
import shutil
import signal
import smtplib
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

POSTFIX = "/usr/sbin/postfix"
POSTCONF = "/usr/sbin/postconf"
COMMAND_SECONDS = 60
START_SECONDS = 30
NOBODY_UID = NOBODY_GID = 65534
ACCESS = {
    "nouser@example.com": "550 5.1.1 User unknown",
    "busy@example.com": "450 4.2.0 Mailbox busy, try again later",
}


def installed() -> bool:
    return os.path.exists(POSTFIX) and os.path.exists("/usr/lib/postfix/sbin/master")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _main_cf(directory: Path, message_size_limit: int, smtputf8: bool) -> str:
    return f"""\
compatibility_level = 3.6
queue_directory = {directory}/queue
data_directory = {directory}/data
mail_owner = postfix
setgid_group = postdrop
maillog_file = {directory}/maillog
maillog_file_prefixes = {directory}
myhostname = relay.test
mydomain = relay.test
myorigin = relay.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
virtual_mailbox_domains = example.com, example.org
virtual_mailbox_base = {directory}/mail
virtual_mailbox_maps = regexp:{directory}/vmailbox
virtual_uid_maps = static:{NOBODY_UID}
virtual_gid_maps = static:{NOBODY_GID}
smtpd_helo_required = yes
smtpd_helo_restrictions = reject_non_fqdn_helo_hostname
smtpd_recipient_restrictions = check_recipient_access texthash:{directory}/recipient_access,
    permit_mynetworks, reject_unauth_destination
message_size_limit = {message_size_limit}
smtputf8_enable = {"yes" if smtputf8 else "no"}
"""


def _master_cf(port: int) -> str:
    """The stock master.cf, listening on 127.0.0.1:port, nothing chrooted."""
    lines = []
    for line in Path("/etc/postfix/master.cf").read_text().splitlines():
        if line and line[0] not in "# \t":
            fields = line.split()
            if fields[:2] == ["smtp", "inet"]:
                fields[0] = f"127.0.0.1:{port}"
            if len(fields) > 4:
                fields[4] = "n"
            line = " ".join(fields)
        lines.append(line)
    return "\n".join(lines) + "\n"


@dataclass
class PostfixInstance:
    directory: Path
    port: int

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def maildir(self) -> Path:
        return self.directory / "mail" / "catchall" / "new"

    def log(self) -> str:
        path = self.directory / "maillog"
        return path.read_text(errors="replace") if path.exists() else ""

    def _run(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False
        )

    def start(self) -> PostfixInstance:
        result = self._run(POSTFIX, "-c", str(self.directory), "start")
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock,
            ):
                if sock.recv(512).startswith(b"220"):
                    break
            time.sleep(0.2)
        else:
            self._fail_to_start(result)
        self.wait_for_sessions_logged()
        return self

    def _fail_to_start(self, result: subprocess.CompletedProcess) -> None:
        self.stop()
        raise RuntimeError(
            f"Postfix did not start (rc={result.returncode}): {result.stderr}\n{self.log()[-2000:]}"
        )

    def set(self, *, smtputf8: bool) -> None:
        """Turn SMTPUTF8 on or off and reload; return once a new session's EHLO shows it."""
        value = "yes" if smtputf8 else "no"
        self._run(POSTCONF, "-c", str(self.directory), "-e", f"smtputf8_enable = {value}")
        self._run(POSTFIX, "-c", str(self.directory), "reload")
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, smtplib.SMTPException):
                with smtplib.SMTP("127.0.0.1", self.port, "[127.0.0.1]", timeout=5) as client:
                    client.ehlo()
                    if client.has_extn("smtputf8") == smtputf8:
                        return
            time.sleep(0.2)
        raise RuntimeError(f"Postfix did not reload with smtputf8_enable = {value}")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._run(POSTFIX, "-c", str(self.directory), "stop")
        pid_file = self.directory / "queue" / "pid" / "master.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)

    def delivered(self, count: int, timeout_seconds: float = 30.0) -> list[bytes]:
        """Wait until `count` messages are in the Maildir; return their bytes."""
        deadline = time.monotonic() + timeout_seconds
        files: list[Path] = []
        while time.monotonic() < deadline:
            files = sorted(self.maildir.glob("*")) if self.maildir.exists() else []
            if len(files) >= count:
                break
            time.sleep(0.2)
        return [path.read_bytes() for path in files]

    def delivered_by_message_id(self, count: int) -> dict[str, email.message.EmailMessage]:
        messages = [
            email.message_from_bytes(data, policy=email.policy.default)
            for data in self.delivered(count)
        ]
        return {str(message["Message-ID"]): message for message in messages}

    def connections(self) -> int:
        """SMTP sessions the relay has seen so far."""
        return len(re.findall(r"postfix/smtpd\[\d+\]: connect from", self.log()))

    def wait_for_sessions_logged(self, timeout_seconds: float = 10.0) -> None:
        """Wait until at least one session is in the log and every one logged has ended.

        smtpd logs a session's ``connect from`` line a moment after it accepts it, so
        a count read just after ``start`` could miss its probe and blame it on the next
        client."""
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            log = self.log()
            connects = len(re.findall(r"postfix/smtpd\[\d+\]: connect from", log))
            if connects and connects == len(re.findall(r"disconnect from", log)):
                return
            time.sleep(0.05)
        raise RuntimeError(f"Postfix did not log its sessions' ends:\n{self.log()[-2000:]}")

    def last_session_summary(self, timeout_seconds: float = 10.0) -> str:
        """The command counts of the last session to end, once every session seen has
        logged its end (smtpd writes it after the client's QUIT has returned)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            ends = re.findall(r"disconnect from \S+ (.*)", self.log())
            if len(ends) >= self.connections() or time.monotonic() > deadline:
                return ends[-1] if ends else ""
            time.sleep(0.05)


def start_instance(*, message_size_limit: int = 20_000, smtputf8: bool = True) -> PostfixInstance:
    directory = Path(tempfile.mkdtemp(prefix="postfix-test-"))
    directory.chmod(0o755)
    for sub in ("queue", "data", "mail"):
        (directory / sub).mkdir()
    shutil.chown(directory / "data", user="postfix")
    os.chown(directory / "mail", NOBODY_UID, NOBODY_GID)
    port = free_port()
    (directory / "main.cf").write_text(_main_cf(directory, message_size_limit, smtputf8))
    (directory / "master.cf").write_text(_master_cf(port))
    (directory / "vmailbox").write_text("/.*/ catchall/\n")
    access = "".join(f"{address} {reply}\n" for address, reply in ACCESS.items())
    (directory / "recipient_access").write_text(access)
    return PostfixInstance(directory, port).start()


def remove(instance: PostfixInstance) -> None:
    instance.stop()
    shutil.rmtree(instance.directory, ignore_errors=True)
