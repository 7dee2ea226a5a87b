"""Provider events: what a provider reports after it accepted a message.

Parsing, verification and the matching rule live here (``sns``, ``ses``,
``webhook``, ``matching``) and do no
database work; recording and correlation live in ``console.store.events``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

DELIVERED = "delivered"
BOUNCED = "bounced"
COMPLAINED = "complained"
ACCEPTANCE_EVENTS = (DELIVERED, BOUNCED, COMPLAINED)  # each proves the provider took the message

PERMANENT = "permanent"
TRANSIENT = "transient"
UNDETERMINED = "undetermined"
BOUNCE_TYPES = (PERMANENT, TRANSIENT, UNDETERMINED)

MAX_EVENT_TYPE_LENGTH = 30


class EventRejected(ValueError):
    """A request carrying an event is refused; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class ReportedEvent:
    """One fact about one recipient of one message, as a provider reported it."""

    source: str  # "ses", "webhook"
    source_event_id: str  # unique within the source: a redelivery carries the same id
    event_type: str  # delivered | bounced | complained | anything else (stored, not applied)
    recipient: str | None = None
    bounce_type: str | None = None  # permanent | transient | undetermined, for bounces
    diagnostic: str | None = None
    provider_message_id: str | None = None
    message_id: str | None = None  # the Message-ID header, with angle brackets
    occurred_at: dt.datetime | None = None
    payload: dict[str, Any] | None = None

    @property
    def suppresses_recipient(self) -> bool:
        """Whether this event puts its recipient on the suppression list."""
        if self.recipient is None:
            return False
        permanent_bounce = self.event_type == BOUNCED and self.bounce_type == PERMANENT
        return permanent_bounce or self.event_type == COMPLAINED


def normalize_message_id(value: Any) -> str | None:
    """Return a Message-ID with its angle brackets, or None when there is none."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if not value.startswith("<"):
        value = f"<{value}>"
    return value


def parse_timestamp(value: Any) -> dt.datetime | None:
    """Read an ISO 8601 timestamp as an aware UTC datetime; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)
