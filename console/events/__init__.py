"""Provider events: what a provider reports after it accepted a message.

Parsing, verification and the matching rule live here (``sns``, ``ses``,
``webhook``, the native providers ``resend``, ``postmark``, ``mailgun`` and
``sendgrid``, ``matching``, and ``metadata``: our reference in a provider's
metadata) and do no database work; recording and correlation live in
``console.store.provider_events``, used request keys in
``console.store.webhook_replay_keys``.

Every provider's report becomes one of the same facts: ``accepted`` (the
provider took the message), ``delivered``, ``delayed`` (still trying),
``bounced`` (permanent, transient or undetermined), ``complained``,
``not_spam`` and ``rejected`` (the provider will never send it). Any other kind
is stored under its own name and applies nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.utils
import json
import math
from typing import Any

DELIVERED = "delivered"
BOUNCED = "bounced"
COMPLAINED = "complained"
ACCEPTED = "accepted"  # the provider took the message and will try to deliver it
DELAYED = "delayed"  # delivery failed for now; the provider tries again
NOT_SPAM = "not_spam"  # a feedback report that the message is not spam: never suppresses
REJECTED = "rejected"  # the provider took the request but will never send the message
# each proves the provider took the message, so an ambiguous send was accepted
ACCEPTANCE_EVENTS = (DELIVERED, BOUNCED, COMPLAINED, ACCEPTED, DELAYED, NOT_SPAM)
# reports about an endpoint's set-up, never about a message: stored, never matched
TOPIC_UNSUBSCRIBED = "topic_unsubscribed"
INBOUND_MAIL = "inbound_mail"
SET_UP_EVENTS = (TOPIC_UNSUBSCRIBED, INBOUND_MAIL)

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
    subtype: str | None = None  # the provider's own finer kind: bounce subtype, feedback type...
    suppress_as: str | None = None  # a suppression reason beyond bounce/complaint ("ses-account")
    never_matched: str | None = None  # why a set-up report is about no message
    reference: str | None = None  # our reference, from the provider's metadata (events.metadata)
    relay_message_id: str | None = None  # a Message-ID that may be the provider's own: used
    # only when one of our intents has exactly it (SendGrid's smtp-id)
    other_provider_ids: tuple[str, ...] = ()  # other spellings of the provider id, also tried

    @property
    def suppresses_recipient(self) -> bool:
        """Whether this event puts its recipient on the suppression list."""
        if self.recipient is None:
            return False
        permanent_bounce = self.event_type == BOUNCED and self.bounce_type == PERMANENT
        return permanent_bounce or self.event_type == COMPLAINED or self.suppress_as is not None

    @property
    def suppression_reason(self) -> str:
        """The reason its suppression entry gives: complaint, bounce, or `suppress_as`."""
        if self.suppress_as is not None:
            return self.suppress_as
        return "complaint" if self.event_type == COMPLAINED else "bounce"


class NonFiniteNumber(ValueError):
    """A JSON body holds NaN, an infinity, or a number too large for a float."""


def load_json(body: bytes | str) -> Any:
    """Parse a JSON body; ValueError (NonFiniteNumber) for a number no database stores alike."""
    return json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)


def _refuse_constant(name: str) -> float:
    raise NonFiniteNumber(f"the body holds {name}, which is not a number a database stores")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumber(f"the body holds {text[:20]}, too large for a number")
    return value


def normalize_message_id(value: Any) -> str | None:
    """Return a Message-ID with its angle brackets, or None when there is none."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if not value.startswith("<"):
        value = f"<{value}>"
    return value


def single_address(values: Any) -> str | None:
    """The one address of a list that holds exactly one ("Ada <ada@x>" gives ada@x), else None."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
        return None
    address = email.utils.parseaddr(values[0])[1] or values[0]
    return address.strip()[:320] or None


def clip(value: Any, limit: int) -> str | None:
    """A non-empty string cut to `limit` characters, else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()[:limit]


SANE_EVENT_YEARS = range(1970, 3000)  # a provider's event outside these years is refused


def parse_timestamp(value: Any) -> dt.datetime | None:
    """Read an ISO 8601 timestamp as an aware UTC datetime; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        parsed = parsed.astimezone(dt.UTC)
    except (ValueError, OverflowError):
        return None
    return parsed if parsed.year in SANE_EVENT_YEARS else None


def parse_epoch(value: Any) -> dt.datetime | None:
    """Read Unix seconds (a number or its text) as an aware UTC datetime; None when unreadable."""
    if isinstance(value, bool):
        return None
    try:
        return dt.datetime.fromtimestamp(float(value), dt.UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def refuse_unstorable_text(data: Any, status: int = 400) -> None:
    """EventRejected (`status`) for a NUL or an unpaired surrogate in any key or text of a
    parsed JSON body: no database column stores them faithfully (SQLite keeps a NUL,
    PostgreSQL refuses it, and neither encodes a lone surrogate)."""
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str):
            _refuse_unstorable_string(value, status)


def _refuse_unstorable_string(value: str, status: int) -> None:
    if "\x00" in value:
        raise EventRejected("the body holds a NUL character", status)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EventRejected("the body holds an unpaired surrogate", status) from None
