"""The one small interface every transport implements.

A transport never decides what a reply means: it reports how far it got and
what the other side said, and the classifier (console.core) turns that into an
outcome.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Protocol

from console.core.send_result import SendResult


@dataclasses.dataclass(frozen=True)
class OutgoingEmail:
    """One rendered email with its stored identity, ready for any transport."""

    intent_id: int
    attempt_id: int
    message_id: str  # with angle brackets, the same on every retry
    idempotency_key: str
    mail_from: str  # the From header
    envelope_from: str  # the bare address for MAIL FROM
    recipient: str
    subject: str
    text: str
    html: str | None
    created_at_epoch: float  # when the intent was created (for idempotency windows)
    as_bytes: Callable[[], bytes]  # RFC 5322 serialization, built on demand


# Called by a transport before it moves an email to a new stage; the worker
# persists DATA_SENT before returning so a crash after it is seen as ambiguous.
# When the callback raises (the worker lost its lease), the transport must not go
# on to that stage: it reports the failure at the stage it had reached.
StageCallback = Callable[[OutgoingEmail, str], Awaitable[None]]


class Transport(Protocol):
    async def send(self, email: OutgoingEmail, on_stage: StageCallback) -> SendResult:
        """Send one email, calling `on_stage` as it goes; never raise for a send failure.

        Calls ``on_stage(email, DATA_SENT)`` and waits for it *before* the first
        byte of the body (or HTTP request) leaves the process.
        """
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
