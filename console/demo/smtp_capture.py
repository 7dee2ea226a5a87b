"""The demo's local SMTP capture server (aiosmtpd on 127.0.0.1), which can misbehave on request.

What it does with a message depends on how the recipient's address starts:

- ``tempfail...``: ``451 4.3.0`` after the body, every time (the worker retries, then gives up);
- ``flaky...``: ``451 4.7.1 Greylisted`` the first time a message arrives, ``250`` afterwards
  (greylisting: a retried send goes through; the domain is not throttling us);
- ``reject...``: ``550 5.1.1`` after the body (a permanent failure);
- ``hangup...``: takes the body, then hangs up without a reply (the outcome is unknown);
- anything else: ``250 2.0.0 Ok: queued as <id>``, and the message is captured.

Queue ids look like a relay's (``DEMO3F9A1C2B000001``) and carry a random
prefix drawn at each start, so a restarted demo never hands out an id again.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import re
import secrets
import threading
from collections.abc import Callable

from aiosmtpd.controller import Controller

TEMPFAIL = "451 4.3.0 Temporary local problem, try again later"
GREYLISTED = "451 4.7.1 Greylisted, please try again later"
REJECT = "550 5.1.1 Mailbox unavailable: user unknown"
HANGUP = "hangup"
ACCEPT = "250"
CAPTURED_KEPT = 500
_MESSAGE_ID = re.compile(rb"^Message-ID:[ \t]*(<[^>\r\n]*>)", re.IGNORECASE | re.MULTILINE)
_SUBJECT = re.compile(rb"^Subject:[ \t]*([^\r\n]*)", re.IGNORECASE | re.MULTILINE)

logging.getLogger("mail.log").setLevel(logging.WARNING)


def behaviour_for(recipient: str, times_seen: int) -> str:
    """Return how to answer a message to `recipient` seen `times_seen` times before."""
    local_part = recipient.lower().partition("@")[0]
    if local_part.startswith("tempfail"):
        return TEMPFAIL
    if local_part.startswith("flaky"):
        return GREYLISTED if times_seen == 0 else ACCEPT
    if local_part.startswith("reject"):
        return REJECT
    if local_part.startswith("hangup"):
        return HANGUP
    return ACCEPT


@dataclasses.dataclass(frozen=True)
class CapturedMessage:
    recipient: str
    message_id: str | None
    subject: str
    answer: str


class CaptureHandler:
    """aiosmtpd handler: answer by the recipient's address, keep the last messages."""

    def __init__(self, on_message: Callable[[CapturedMessage], None] | None = None) -> None:
        self.captured: collections.deque[CapturedMessage] = collections.deque(maxlen=CAPTURED_KEPT)
        self._on_message = on_message
        self._times_seen: collections.Counter[tuple[str, str | None]] = collections.Counter()
        self._queue_id_prefix = secrets.token_hex(4).upper()  # new at every start
        self._queue_ids = itertools.count(1)
        self._lock = threading.Lock()

    def next_queue_id(self) -> str:
        """A queue id never handed out before, also by an earlier run of the demo."""
        return f"DEMO{self._queue_id_prefix}{next(self._queue_ids):06d}"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        headers = envelope.content.partition(b"\r\n\r\n")[0]
        message_id = _first(_MESSAGE_ID, headers)
        subject = _first(_SUBJECT, headers) or ""
        recipient = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        with self._lock:
            times_seen = self._times_seen[(recipient.lower(), message_id)]
            self._times_seen[(recipient.lower(), message_id)] += 1
        behaviour = behaviour_for(recipient, times_seen)
        if behaviour == ACCEPT:
            behaviour = f"250 2.0.0 Ok: queued as {self.next_queue_id()}"
        self._keep(CapturedMessage(recipient, message_id, subject, behaviour))
        if behaviour == HANGUP:
            server.transport.abort()  # the body arrived; the reply never will
            return TEMPFAIL  # not sent: the connection is gone
        return behaviour

    def _keep(self, message: CapturedMessage) -> None:
        with self._lock:
            self.captured.append(message)
        if self._on_message is not None:
            self._on_message(message)


def _first(pattern: re.Pattern[bytes], headers: bytes) -> str | None:
    match = pattern.search(headers)
    return match.group(1).decode("utf-8", "replace") if match else None


class DemoSMTPServer:
    """The capture server on 127.0.0.1:`port`, running in a background thread."""

    def __init__(
        self, port: int, on_message: Callable[[CapturedMessage], None] | None = None
    ) -> None:
        self.handler = CaptureHandler(on_message)
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=port)

    @property
    def url(self) -> str:
        """The CONSOLE_SMTP_URL that sends to this server."""
        return f"smtp://127.0.0.1:{self.controller.port}"

    def start(self) -> DemoSMTPServer:
        """Start serving; a port that cannot be bound raises, the server's loop closed."""
        try:
            self.controller.start()
        except BaseException:
            self._discard()
            raise
        return self

    def _discard(self) -> None:
        """Stop the thread of a server that failed to start and close its event loop (left
        open, it is collected at exit with a traceback on stderr)."""
        with contextlib.suppress(Exception):
            self.controller.stop(no_assert=True)
        loop = self.controller.loop
        if not loop.is_running() and not loop.is_closed():
            loop.close()

    def stop(self) -> None:
        self.controller.stop()
