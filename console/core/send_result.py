"""What a transport reports of one attempt, and how far it got. Pure: the classifier reads it."""

from __future__ import annotations

import dataclasses

from console.vocabulary import DATA_SENT, STAGES


def handed_over(stage: str) -> bool:
    """Return whether an attempt at `stage` may have delivered the message."""
    return STAGES.index(stage) >= STAGES.index(DATA_SENT)


@dataclasses.dataclass
class SendResult:
    """What happened to one attempt, as seen by the transport."""

    stage: str
    # which rows of the classifier apply: "smtp", "http" (the generic HTTP rows) or a
    # native provider's table ("http/postmark", ...: console.core.provider_tables)
    protocol: str = "smtp"
    code: int | None = None  # SMTP reply code or HTTP status
    enhanced_status: str | None = None  # e.g. "5.1.1"
    reply_text: str | None = None  # the 250 text often carries the relay's queue id
    provider_message_id: str | None = None
    error: str | None = None  # exception type and message, when one was raised
    # the exception class name, or the provider's error code in its answer, for the classifier
    error_type: str | None = None
    retry_after_seconds: float | None = None
    duration_ms: int | None = None
    # True when the request carried an idempotency key the provider honours, so a
    # retry after an unknown outcome cannot produce a second message.
    idempotency_honoured: bool = False
