"""What a transport reports of one attempt, and how far it got. Pure: the classifier reads it."""

from __future__ import annotations

import dataclasses

from console.core.storable_text import storable
from console.vocabulary import DATA_SENT, STAGES

# aiosmtplib decodes a reply with ``surrogateescape``: bytes that were not UTF-8 arrive as
# lone surrogates, which no database column stores.
_TEXT_FIELDS = ("enhanced_status", "reply_text", "provider_message_id", "error", "error_type")


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

    def __post_init__(self) -> None:
        """Whatever the relay or provider sent, the texts kept are ones the database stores
        and a page shows: an unstorable character becomes U+FFFD."""
        for name in _TEXT_FIELDS:
            text = getattr(self, name)
            if text:
                setattr(self, name, storable(text))
