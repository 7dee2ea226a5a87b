"""A scriptable SMTP server (aiosmtpd) on 127.0.0.1, in-process or as a subprocess.

Each recipient can be told how to answer its 1st, 2nd, ... attempt (the last
behaviour repeats); recipients without a script use ``"*"`` (default: accept).
A behaviour is one string:

- ``"250"``: accept the body, answering ``250 2.0.0 Ok: queued as <id>`` (an id
  shaped like a relay's queue id, with a random prefix per server start, so ids
  never repeat across restarts);
- ``"421"``, ``"450"``, ``"451"``, ``"452"``, ``"550"``, ``"553"``, ``"554"`` (or
  any ``"NNN optional text"``): answer that code after the body;
- ``"rcpt:550"`` (any code): refuse the recipient at RCPT TO;
- ``"rcpt:stall"``: never answer RCPT TO (the client times out before DATA);
- ``"stall"``: take the body, then answer nothing for ``stall_seconds``;
- ``"hangup"``: take the body, then drop the connection without a reply.

Every body that arrives is recorded with its Message-ID, recipient and what the
server did with it (``result``: the code it answered, ``"stall"`` or
``"hangup"``), in memory and, with `record_path`, as JSON lines in a file, so a
test can check "each Message-ID received at most once".

In-process::

    with ScriptedSMTPServer(script={"bob@example.com": ["451", "250"]}) as server:
        ...  # CONSOLE_SMTP_URL=server.url
        server.delivered_message_ids()

As a subprocess (for the demo, scale-out tests or a benchmark sink)::

    server = SubprocessSMTPServer.start(record_path=path, script={"*": ["250"]})
    ...
    server.stop(); read_records(path)

or from a shell: ``python tests/smtp_server.py --port 2525 --record /tmp/smtp.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import functools
import itertools
import json
import logging
import os
import re
import secrets
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

DEFAULT_REPLIES = {
    250: "2.0.0 Ok: queued as {queue_id}",
    421: "4.7.0 Service not available, closing transmission channel",
    450: "4.2.0 Mailbox busy, try again later",
    451: "4.3.0 Local error in processing",
    452: "4.3.1 Insufficient system storage",
    550: "5.1.1 Mailbox unavailable: user unknown",
    553: "5.1.3 Mailbox name not allowed",
    554: "5.7.1 Transaction failed: message rejected",
}
DELIVERED_RESULTS = ("250", "stall", "hangup")  # the server has the body and may deliver it
_MESSAGE_ID = re.compile(rb"^Message-ID:[ \t]*(<[^>\r\n]*>)", re.IGNORECASE | re.MULTILINE)

logging.getLogger("mail.log").setLevel(logging.WARNING)


@dataclasses.dataclass(frozen=True)
class Received:
    """One body that reached the server, and what the server answered to it."""

    message_id: str | None
    recipient: str
    result: str  # "250", "451", ..., "stall" or "hangup"
    queue_id: str | None = None
    mail_options: tuple[str, ...] = ()  # the MAIL FROM parameters: SIZE=, BODY=, SMTPUTF8
    content: bytes | None = dataclasses.field(default=None, repr=False)  # in memory only


def _reply(code: int, text: str | None, queue_id: str = "") -> str:
    template = text if text else DEFAULT_REPLIES.get(code, "")
    return f"{code} {template.format(queue_id=queue_id)}".rstrip()


def _parse_code(behaviour: str) -> tuple[int, str | None]:
    code, _, text = behaviour.partition(" ")
    if not (code.isdigit() and len(code) == 3):
        raise ValueError(f"unknown SMTP behaviour {behaviour!r}")
    return int(code), text or None


class Script:
    """Which behaviour each recipient gets on each attempt; thread-safe."""

    def __init__(self, rules: Mapping[str, Iterable[str]] | None = None) -> None:
        self._rules: dict[str, list[str]] = {"*": ["250"]}
        self._attempts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        for recipient, behaviours in (rules or {}).items():
            self.set(recipient, behaviours)

    def set(self, recipient: str, behaviours: Iterable[str]) -> None:
        """Script `recipient` (or ``"*"``): its Nth attempt gets the Nth behaviour."""
        behaviours = list(behaviours)
        if not behaviours:
            raise ValueError("a script needs at least one behaviour")
        for behaviour in behaviours:
            if behaviour not in ("stall", "hangup", "rcpt:stall"):
                _parse_code(behaviour.removeprefix("rcpt:"))
        with self._lock:
            self._rules[recipient.lower()] = behaviours

    def next_for(self, recipient: str) -> str:
        """Count an attempt for `recipient` and return the behaviour it gets."""
        key = recipient.lower()
        with self._lock:
            behaviours = self._rules.get(key, self._rules["*"])
            attempt = self._attempts[key]
            self._attempts[key] += 1
        return behaviours[min(attempt, len(behaviours) - 1)]


class ScriptedHandler:
    """aiosmtpd handler answering as the script says and recording every body."""

    def __init__(
        self, script: Script, record_path: str | os.PathLike[str] | None, stall_seconds: float
    ) -> None:
        self.script = script
        self.stall_seconds = stall_seconds
        self.received: list[Received] = []
        self._record = open(record_path, "a", buffering=1) if record_path else None  # noqa: SIM115
        self._queue_id_prefix = secrets.token_hex(4).upper()  # new at every server start
        self._queue_ids = itertools.count(1)
        self._lock = threading.Lock()
        self.ehlo_names: list[str] = []  # every name a client gave in EHLO/HELO
        self.commands: collections.Counter[str] = collections.Counter()  # RSET, QUIT, ...

    def next_queue_id(self) -> str:
        """A queue id such as ``Q3F9A1C2B000001``: never repeated, also after a restart."""
        return f"Q{self._queue_id_prefix}{next(self._queue_ids):06X}"

    async def handle_EHLO(self, server, session, envelope, hostname, responses):  # noqa: N802
        session.host_name = hostname  # aiosmtpd leaves this to a handler with an EHLO hook
        self.ehlo_names.append(hostname)
        self.commands["EHLO"] += 1
        return responses

    async def handle_RSET(self, server, session, envelope):  # noqa: N802
        self.commands["RSET"] += 1
        return "250 OK"

    async def handle_QUIT(self, server, session, envelope):  # noqa: N802
        self.commands["QUIT"] += 1
        return "221 Bye"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802
        behaviour = self.script.next_for(address)
        if behaviour == "rcpt:stall":
            await asyncio.sleep(self.stall_seconds)
            return _reply(451, None)
        if behaviour.startswith("rcpt:"):
            return _reply(*_parse_code(behaviour.removeprefix("rcpt:")))
        envelope.rcpt_tos.append(address)
        envelope.__dict__.setdefault("behaviours", []).append(behaviour)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        behaviour = envelope.__dict__.get("behaviours", ["250"])[0]
        match = _MESSAGE_ID.search(envelope.content.partition(b"\r\n\r\n")[0])
        message_id = match.group(1).decode() if match else None
        recipient = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        received = functools.partial(
            Received,
            mail_options=tuple(envelope.mail_options),
            content=bytes(envelope.original_content or envelope.content),
        )
        if behaviour == "hangup":
            self._keep(received(message_id, recipient, "hangup"))
            server.transport.abort()
            return "250 never sent"
        if behaviour == "stall":
            self._keep(received(message_id, recipient, "stall"))
            await asyncio.sleep(self.stall_seconds)
            return "250 2.0.0 Ok: too late"
        code, text = _parse_code(behaviour)
        queue_id = self.next_queue_id() if code == 250 else None
        self._keep(received(message_id, recipient, str(code), queue_id))
        return _reply(code, text, queue_id or "")

    def _keep(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)
            if self._record is not None:
                fields = dataclasses.asdict(received)
                del fields["content"]
                self._record.write(json.dumps(fields) + "\n")

    def close(self) -> None:
        if self._record is not None:
            self._record.close()


class _Authenticator:
    def __init__(self, username: str, password: str) -> None:
        self.expected = (username.encode(), password.encode())

    def __call__(self, server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and (
                auth_data.login,
                auth_data.password,
            )
            == self.expected
        )
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 on failure


class ScriptedSMTPServer:
    """The scripted server running on its own event loop in a background thread."""

    def __init__(
        self,
        *,
        script: Mapping[str, Iterable[str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
        stall_seconds: float = 10.0,
        auth: tuple[str, str] | None = None,
        tls_context: ssl.SSLContext | None = None,
        starttls_context: ssl.SSLContext | None = None,
        smtputf8: bool = True,
        size_limit: int | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._smtputf8 = smtputf8
        self._size_limit = size_limit
        self.script = Script(script)
        self.handler = ScriptedHandler(self.script, record_path, stall_seconds)
        self._auth = auth
        self._tls_context = tls_context
        self._starttls_context = starttls_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.connections_opened = 0  # how many SMTP sessions clients started
        self._sessions: list[SMTP] = []

    @property
    def url(self) -> str:
        """A CONSOLE_SMTP_URL for this server (credentials included when AUTH is on)."""
        scheme = "smtps" if self._tls_context else "smtp"
        user = f"{self._auth[0]}:{self._auth[1]}@" if self._auth else ""
        query = "?starttls=1" if self._starttls_context else ""
        return f"{scheme}://{user}{self.host}:{self.port}{query}"

    @property
    def received(self) -> list[Received]:
        with self.handler._lock:
            return list(self.handler.received)

    def delivered_message_ids(self) -> collections.Counter[str]:
        """Count, per Message-ID, the bodies the server has and may have delivered."""
        return collections.Counter(
            r.message_id for r in self.received if r.result in DELIVERED_RESULTS
        )

    def _protocol(self) -> SMTP:
        self.connections_opened += 1
        options = dict(hostname="smtp.test", enable_SMTPUTF8=self._smtputf8)
        if self._size_limit is not None:
            options.update(data_size_limit=self._size_limit)
        if self._auth:
            options.update(authenticator=_Authenticator(*self._auth), auth_require_tls=False)
        if self._starttls_context:
            options.update(tls_context=self._starttls_context)
        session = SMTP(self.handler, **options)
        self._sessions.append(session)
        return session

    def start(self) -> ScriptedSMTPServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                server = loop.run_until_complete(
                    loop.create_server(self._protocol, self.host, self.port, ssl=self._tls_context)
                )
                self.port = server.sockets[0].getsockname()[1]
            except BaseException as error:  # noqa: BLE001 - reported to start()
                failure.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            server.close()
            for session in self._sessions:  # drop the connections clients left open
                if session.transport is not None:
                    session.transport.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="scripted-smtp", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self.handler.close()

    def __enter__(self) -> ScriptedSMTPServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def read_records(record_path: str | os.PathLike[str]) -> list[Received]:
    """Read what a server recorded to `record_path`."""
    path = Path(record_path)
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [Received(**dict(r, mail_options=tuple(r.get("mail_options", ())))) for r in records]


def delivered_counts(record_path: str | os.PathLike[str]) -> collections.Counter[str]:
    """Count per Message-ID the bodies a recording server has and may have delivered."""
    return collections.Counter(
        r.message_id for r in read_records(record_path) if r.result in DELIVERED_RESULTS
    )


@dataclasses.dataclass
class SubprocessSMTPServer:
    """The scripted server in a child process (``python tests/smtp_server.py``)."""

    process: subprocess.Popen
    port: int
    record_path: str | None

    @classmethod
    def start(
        cls,
        *,
        record_path: str | os.PathLike[str] | None = None,
        script: Mapping[str, Iterable[str]] | None = None,
        stall_seconds: float = 10.0,
        port: int = 0,
    ) -> SubprocessSMTPServer:
        command = [
            sys.executable,
            __file__,
            "--port",
            str(port),
            "--stall-seconds",
            str(stall_seconds),
            "--script",
            json.dumps(dict(script or {})),
        ]
        if record_path is not None:
            command += ["--record", str(record_path)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = process.stdout.readline()
        if not line.startswith("SMTP_READY port="):
            process.kill()
            raise RuntimeError(f"the SMTP server did not start: {line!r}")
        return cls(process, int(line.split("=", 1)[1]), str(record_path) if record_path else None)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def delivered_counts(self) -> collections.Counter[str]:
        return delivered_counts(self.record_path) if self.record_path else collections.Counter()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted SMTP server on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", help="append received bodies as JSON lines to this file")
    parser.add_argument("--script", default="{}", help='JSON, e.g. {"*": ["250"]}')
    parser.add_argument("--stall-seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    server = ScriptedSMTPServer(
        script=json.loads(args.script),
        port=args.port,
        record_path=args.record,
        stall_seconds=args.stall_seconds,
    ).start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    print(f"SMTP_READY port={server.port}", flush=True)
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main()
