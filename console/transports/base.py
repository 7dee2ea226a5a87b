"""The one small interface every transport implements.

A transport never decides what a reply means: it reports how far it got and
what the other side said, and the classifier (console.core) turns that into an
outcome.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Protocol

# How far one attempt got, in order. Before DATA_SENT nothing was handed over.
CLAIMED = "claimed"
CONNECTING = "connecting"
ENVELOPE = "envelope"
DATA_SENT = "data_sent"  # the body (or HTTP request) may have reached the other side
REPLY_READ = "reply_read"
STAGES = (CLAIMED, CONNECTING, ENVELOPE, DATA_SENT, REPLY_READ)


def handed_over(stage: str) -> bool:
    """Return whether an attempt at `stage` may have delivered the message."""
    return STAGES.index(stage) >= STAGES.index(DATA_SENT)


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


@dataclasses.dataclass
class SendResult:
    """What happened to one attempt, as seen by the transport."""

    stage: str
    protocol: str = "smtp"  # "smtp" or "http": which rows of the classifier apply
    code: int | None = None  # SMTP reply code or HTTP status
    enhanced_status: str | None = None  # e.g. "5.1.1"
    reply_text: str | None = None  # the 250 text often carries the relay's queue id
    provider_message_id: str | None = None
    error: str | None = None  # exception type and message, when one was raised
    error_type: str | None = None  # the exception class name, for the classifier
    retry_after_seconds: float | None = None
    duration_ms: int | None = None
    # True when the request carried an idempotency key the provider honours, so a
    # retry after an unknown outcome cannot produce a second message.
    idempotency_honoured: bool = False


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
