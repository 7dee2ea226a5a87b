"""The generic signed webhook: any provider or relay can report events in one JSON format.

A request carries one event as a JSON object::

    {"id": "evt-1", "type": "bounced", "provider_message_id": "abc123",
     "recipient": "ada@example.com", "bounce_type": "permanent",
     "diagnostic": "smtp; 550 5.1.1 user unknown", "occurred_at": "2025-01-31T12:00:00Z"}

``id`` (unique per sender) and ``type`` are required, and at least one of
``provider_message_id`` and ``message_id`` (the Message-ID header, with or
without angle brackets). It is signed with a shared secret: the sender puts the
Unix time in ``X-Outbox-Timestamp`` and ``hex(HMAC-SHA256(secret,
"<timestamp>.<body>"))`` in ``X-Outbox-Signature``. A request older or newer
than the tolerance is refused, and a replayed event id is recorded only once.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from console.events import (
    BOUNCE_TYPES,
    BOUNCED,
    MAX_EVENT_TYPE_LENGTH,
    UNDETERMINED,
    EventRejected,
    ReportedEvent,
    load_json,
    normalize_message_id,
    parse_timestamp,
    refuse_unstorable_text,
)

SOURCE = "webhook"
TIMESTAMP_HEADER = "X-Outbox-Timestamp"
SIGNATURE_HEADER = "X-Outbox-Signature"
DEFAULT_TOLERANCE_SECONDS = 300.0
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_EVENT_TYPE = re.compile(r"^[a-z][a-z0-9_.-]*$")
_TEXT_LIMITS = {"id": 255, "provider_message_id": 255, "message_id": 255, "recipient": 320}


def compute_signature(secret: str, timestamp: str, body: bytes) -> str:
    """Return the hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under `secret`."""
    signed = timestamp.encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify_signature(
    *,
    secret: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now_epoch_seconds: float,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Return quietly when the request is signed with `secret` and recent; else raise."""
    if not timestamp or not _TIMESTAMP.match(timestamp):
        raise EventRejected(f"{TIMESTAMP_HEADER} must be Unix seconds", 401)
    if not signature:
        raise EventRejected(f"{SIGNATURE_HEADER} is missing", 401)
    if abs(now_epoch_seconds - int(timestamp)) > tolerance_seconds:
        raise EventRejected(f"{TIMESTAMP_HEADER} is outside the replay window", 401)
    expected = compute_signature(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode(), signature.strip().lower().encode()):
        raise EventRejected("the signature does not match", 401)


def parse_event(body: bytes) -> ReportedEvent:
    """Read one event in the documented format; EventRejected (400) says what is wrong."""
    try:
        data = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise EventRejected("the body is not JSON") from None
    if not isinstance(data, dict):
        raise EventRejected("the body must be one JSON object")
    refuse_unstorable_text(data)
    fields = {name: _text(data, name) for name in (*_TEXT_LIMITS, "type", "diagnostic")}
    if not fields["id"]:
        raise EventRejected("'id' is required")
    event_type = _event_type(fields["type"])
    message_id = normalize_message_id(fields["message_id"])
    if not fields["provider_message_id"] and not message_id:
        raise EventRejected("one of 'provider_message_id' and 'message_id' is required")
    occurred_at = parse_timestamp(data.get("occurred_at"))
    if data.get("occurred_at") is not None and occurred_at is None:
        raise EventRejected("'occurred_at' must be an ISO 8601 timestamp")
    return ReportedEvent(
        source=SOURCE,
        source_event_id=fields["id"],
        event_type=event_type,
        recipient=fields["recipient"],
        bounce_type=_bounce_type(data) if event_type == BOUNCED else None,
        diagnostic=fields["diagnostic"],
        provider_message_id=fields["provider_message_id"],
        message_id=message_id,
        occurred_at=occurred_at,
        payload=data,
    )


def _text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise EventRejected(f"'{name}' must be a string")
    limit = _TEXT_LIMITS.get(name)
    if limit is not None and len(value) > limit:
        raise EventRejected(f"'{name}' is longer than {limit} characters")
    return value.strip() or None


def _event_type(raw: str | None) -> str:
    if not raw:
        raise EventRejected("'type' is required")
    if len(raw) > MAX_EVENT_TYPE_LENGTH or not _EVENT_TYPE.match(raw):
        raise EventRejected(
            f"'type' must be a lowercase word of at most {MAX_EVENT_TYPE_LENGTH} characters"
        )
    return raw


def _bounce_type(data: dict[str, Any]) -> str:
    bounce_type = data.get("bounce_type", UNDETERMINED)
    if bounce_type not in BOUNCE_TYPES:
        raise EventRejected(f"'bounce_type' must be one of {', '.join(BOUNCE_TYPES)}")
    return bounce_type
