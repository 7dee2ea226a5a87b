"""The scripting, the handler and the records of the scripted SMTP server
(tests/support/smtp_server.py): which behaviour each recipient gets on each attempt, the
aiosmtpd handler that answers so, and what the server received."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import itertools
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from aiosmtpd.smtp import AuthResult, LoginPassword

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


@dataclasses.dataclass(frozen=True)
class Received:
    """One body that reached the server, and what the server answered to it."""

    message_id: str | None
    recipient: str
    result: str  # "250", "451", ..., "stall" or "hangup"
    queue_id: str | None = None
    mail_options: tuple[str, ...] = ()  # the MAIL FROM parameters: SIZE=, BODY=, SMTPUTF8
    received_at: float | None = None  # time.time() when the body arrived (None: older records)
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
    """Which behaviour each recipient gets on each attempt; thread-safe.

    A key ``"#N"`` scripts the Nth body to arrive (from 1, whoever it is for) instead:
    its first behaviour replaces the recipient's, as a provider answers whichever
    message comes when it is over a limit (e.g. ``{"#60": ["454 4.7.0 Throttling
    failure: Maximum sending rate exceeded"]}``). Only body behaviours apply there.
    """

    def __init__(self, rules: Mapping[str, Iterable[str]] | None = None) -> None:
        self._rules: dict[str, list[str]] = {"*": ["250"]}
        self._attempts: collections.Counter[str] = collections.Counter()
        self._by_arrival: dict[int, str] = {}
        self._arrivals = 0
        self._lock = threading.Lock()
        for recipient, behaviours in (rules or {}).items():
            self.set(recipient, behaviours)

    def set(self, recipient: str, behaviours: Iterable[str]) -> None:
        """Script `recipient` (or ``"*"``): its Nth attempt gets the Nth behaviour;
        ``"#N"``: the Nth body to arrive gets the first behaviour."""
        behaviours = list(behaviours)
        if recipient.startswith("#"):
            self._set_arrival(int(recipient[1:]), behaviours)
            return
        if not behaviours:
            raise ValueError("a script needs at least one behaviour")
        for behaviour in behaviours:
            if behaviour not in ("stall", "hangup", "rcpt:stall"):
                _parse_code(behaviour.removeprefix("rcpt:").removeprefix("latin1:"))
        with self._lock:
            self._rules[recipient.lower()] = behaviours

    def _set_arrival(self, number: int, behaviours: list[str]) -> None:
        if number < 1 or not behaviours or behaviours[0].startswith("rcpt:"):
            raise ValueError(f"an arrival needs a number from 1 and a body behaviour: #{number}")
        if behaviours[0] not in ("stall", "hangup"):
            _parse_code(behaviours[0])
        with self._lock:
            self._by_arrival[number] = behaviours[0]

    def next_arrival(self) -> str | None:
        """Count a body arriving; return the behaviour scripted for its number, if any."""
        with self._lock:
            self._arrivals += 1
            return self._by_arrival.get(self._arrivals)

    def next_for(self, recipient: str) -> str:
        """Count an attempt for `recipient` and return the behaviour it gets."""
        key = recipient.lower()
        with self._lock:
            behaviours = self._rules.get(key, self._rules["*"])
            attempt = self._attempts[key]
            self._attempts[key] += 1
        return behaviours[min(attempt, len(behaviours) - 1)]


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


_MESSAGE_ID = re.compile(rb"^Message-ID:[ \t]*(<[^>\r\n]*>)", re.IGNORECASE | re.MULTILINE)


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
        self.offer_pipelining = False  # say PIPELINING in the EHLO reply
        self.offer_chunking = False  # say CHUNKING in the EHLO reply (BDAT)

    def next_queue_id(self) -> str:
        """A queue id such as ``Q3F9A1C2B000001``: never repeated, also after a restart."""
        return f"Q{self._queue_id_prefix}{next(self._queue_ids):06X}"

    async def handle_EHLO(self, server, session, envelope, hostname, responses):  # noqa: N802
        session.host_name = hostname  # aiosmtpd leaves this to a handler with an EHLO hook
        self.ehlo_names.append(hostname)
        self.commands["EHLO"] += 1
        if self.offer_pipelining:
            responses.insert(-1, "250-PIPELINING")  # before the last line, "250 HELP"
        if self.offer_chunking:
            responses.insert(-1, "250-CHUNKING")
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
        behaviour = self.script.next_arrival() or behaviour
        match = _MESSAGE_ID.search(envelope.content.partition(b"\r\n\r\n")[0])
        message_id = match.group(1).decode() if match else None
        recipient = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        received = functools.partial(
            Received,
            mail_options=tuple(envelope.mail_options),
            received_at=time.time(),
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
        latin1, behaviour = behaviour.startswith("latin1:"), behaviour.removeprefix("latin1:")
        code, text = _parse_code(behaviour)
        queue_id = self.next_queue_id() if code == 250 else None
        self._keep(received(message_id, recipient, str(code), queue_id))
        reply = _reply(code, text, queue_id or "")
        return reply.encode("latin-1") if latin1 else reply

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
