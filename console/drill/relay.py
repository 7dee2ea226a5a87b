"""The drill's local SMTP relay (aiosmtpd on 127.0.0.1, a free port) that misbehaves on cue.

Each recipient gets a list of answers, one an arrival (the last repeats); a recipient
without one is accepted. An answer is ``"250"`` (accepted, with a queue id as a relay
gives), ``"NNN text"`` (that reply after the body), ``"stall"`` (the body taken, no reply
until the client gives up) or ``"hangup"`` (the body taken, the connection dropped).
A recipient can also be held at RCPT TO until the drill lets it go, so that something
happens between the claim and the body. Every body that arrives is kept with its
Message-ID, recipient, answer and text, so a drill can count how often a Message-ID
arrived and read what the recipient saw. Nothing is ever passed on: the relay delivers
nowhere.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import re
import secrets
import threading
from collections.abc import Iterable

from aiosmtpd.smtp import SMTP

ACCEPT, STALL, HANGUP = "250", "stall", "hangup"
STALL_SECONDS = 30.0  # longer than any client timeout the drill sets
# The longest a recipient is held at RCPT TO: the drill lets it go as soon as it has done
# what it holds it for; this bound only ends a hold the drill never ended. The worker of
# such a drill waits longer for RCPT's reply (crashes.HELD_TIMINGS).
HOLD_SECONDS = 60.0
_MESSAGE_ID = re.compile(rb"^Message-ID:[ \t]*(<[^>\r\n]*>)", re.IGNORECASE | re.MULTILINE)

logging.getLogger("mail.log").setLevel(logging.WARNING)


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One body that reached the relay, and what the relay answered."""

    recipient: str
    message_id: str | None
    answer: str  # "250 ...", "451 ...", "stall" or "hangup"
    content: bytes = dataclasses.field(repr=False)
    duplicate: bool = False  # a provider's answer to a repeated idempotency key: no new email

    @property
    def accepted_or_unknown(self) -> bool:
        """Whether the sender may take this body as delivered (accepted, or no answer)."""
        taken = self.answer.startswith("2") or self.answer in (STALL, HANGUP)
        return taken and not self.duplicate


class _Handler:
    """aiosmtpd handler: answer each body as its recipient's script says; keep it."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[str]] = {}
        self.arrivals: list[Arrival] = []
        self._seen: collections.Counter[str] = collections.Counter()
        self._queue_ids = itertools.count(1)
        self._prefix = secrets.token_hex(4).upper()
        self.lock = threading.Lock()
        self.held: dict[str, tuple[threading.Event, threading.Event]] = {}

    def answer_for(self, recipient: str) -> str:
        with self.lock:
            script = self.scripts.get(recipient.lower(), [ACCEPT])
            index = min(self._seen[recipient.lower()], len(script) - 1)
            self._seen[recipient.lower()] += 1
        answer = script[index]
        if answer == ACCEPT:
            return f"250 2.0.0 Ok: queued as DRILL{self._prefix}{next(self._queue_ids):06d}"
        return answer

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802
        """Accept the recipient; one held by ``hold_at_rcpt`` waits to be let go first."""
        with self.lock:
            held = self.held.pop(address.lower(), None)
        if held is not None:
            arrived, release = held
            arrived.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait, HOLD_SECONDS)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        recipient = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        answer = self.answer_for(recipient)
        found = _MESSAGE_ID.search(envelope.content.partition(b"\r\n\r\n")[0])
        message_id = found.group(1).decode("ascii", "replace") if found else None
        with self.lock:
            self.arrivals.append(Arrival(recipient, message_id, answer, envelope.content))
        if answer == HANGUP:
            server.transport.abort()
            return "421 4.3.0 closing"  # never read: the connection is gone
        if answer == STALL:
            await asyncio.sleep(STALL_SECONDS)
            server.transport.abort()
            return "421 4.3.0 closing"
        return answer


class DrillRelay:
    """The relay on its own event loop in a background thread; ``url`` is its SMTP URL."""

    transport = "smtp"
    honours_keys = False  # an SMTP relay knows no idempotency key

    def __init__(self) -> None:
        self.handler = _Handler()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: list[SMTP] = []

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def environment(self, environ: dict[str, str]) -> None:
        """Point the workers' settings at this relay."""
        environ["CONSOLE_SMTP_URL"] = self.url

    def script(self, recipient: str, answers: Iterable[str]) -> None:
        """Answer `recipient`'s first, second... body with `answers` (the last repeats)."""
        with self.handler.lock:
            self.handler.scripts[recipient.lower()] = list(answers)

    def hold_at_rcpt(self, recipient: str) -> tuple[threading.Event, threading.Event]:
        """Hold `recipient`'s next RCPT TO: return (set when it arrives, set to let it go)."""
        held = (threading.Event(), threading.Event())
        with self.handler.lock:
            self.handler.held[recipient.lower()] = held
        return held

    def arrivals(self, message_id: str | None = None) -> list[Arrival]:
        """The bodies received, oldest first; only those with `message_id` when given."""
        with self.handler.lock:
            kept = list(self.handler.arrivals)
        return [a for a in kept if message_id is None or a.message_id == message_id]

    def _protocol(self) -> SMTP:
        session = SMTP(self.handler, hostname="relay.drill.localhost")
        self._sessions.append(session)
        return session

    def start(self) -> DrillRelay:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                server = loop.run_until_complete(loop.create_server(self._protocol, "127.0.0.1", 0))
            except BaseException as error:  # noqa: BLE001 - reported by start()
                failure.append(error)
                ready.set()
                return
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            server.close()
            for session in self._sessions:
                if session.transport is not None:
                    session.transport.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="drill-relay", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> DrillRelay:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
