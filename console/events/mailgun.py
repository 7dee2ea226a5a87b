"""Mailgun webhooks: the signature block and Mailgun's ``event-data``.

Mailgun posts JSON ``{"signature": {"timestamp", "token", "signature"},
"event-data": {...}}``; ``signature`` is ``hex(HMAC-SHA256(signing key,
timestamp + token))`` ("Securing webhooks"). An event of a subaccount's domain
also carries ``parent-signature``, the same HMAC under the parent account's
key: either one matching its configured key verifies the request. The
timestamp must be within the window (Mailgun retries with the original block
for 8 hours), and a token already used is a replay
(``console.store.webhook_replay_keys``). A body that is not JSON (Mailgun's legacy
form-encoded webhooks) is answered 406, which Mailgun does not retry.

``event-data.event`` and its severity decide the fact:

- ``delivered`` → delivered; ``accepted`` → accepted; ``complained`` → complained;
- ``failed`` with severity ``temporary``: Mailgun tries again → delayed;
- ``failed`` with severity ``permanent``: a bounce — permanent when the last
  reply was 5xx (or there was none), else transient (e.g. retries expired on a
  4xx). Reasons ``suppress-bounce``, ``suppress-complaint`` and
  ``suppress-unsubscribe`` mean Mailgun never tried: rejected, and the address
  is suppressed here too (``mailgun-account``);
- ``rejected`` → rejected; anything else is stored, nothing applied.

The Message-ID header Mailgun reports (``message.headers.message-id``) names
the message, and our reference comes back in ``user-variables`` (sent in
``X-Mailgun-Variables``); the event's own ``id`` is its id.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from console.events import (
    ACCEPTED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    PERMANENT,
    REJECTED,
    TRANSIENT,
    EventRejected,
    ReportedEvent,
    clip,
    load_json,
    normalize_message_id,
    parse_epoch,
    refuse_unstorable_text,
)
from console.events.metadata import reference_in

SOURCE = "mailgun"
ACCOUNT_REASON = "mailgun-account"
NEVER_TRIED = ("suppress-bounce", "suppress-complaint", "suppress-unsubscribe")
NOT_ACCEPTABLE = 406  # Mailgun does not retry a POST answered 406 ("Automatic Retries")
LEGACY_REFUSED = "the body is not JSON: Mailgun's legacy webhooks are not read, use its JSON ones"
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_SIMPLE = {"delivered": DELIVERED, "accepted": ACCEPTED, "complained": COMPLAINED}


def read_body(body: bytes) -> dict[str, Any]:
    """The JSON object Mailgun posted; EventRejected 406 (not retried) when the body is not
    JSON or holds text no database stores, 400 when it is JSON but not one object."""
    try:
        data = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise EventRejected(LEGACY_REFUSED, NOT_ACCEPTABLE) from None
    if not isinstance(data, dict):
        raise EventRejected("the body must be one JSON object")
    refuse_unstorable_text(data, NOT_ACCEPTABLE)
    return data


def compute_signature(signing_key: str, timestamp: str, token: str) -> str:
    """The hex HMAC-SHA256 of ``timestamp + token`` under the webhook signing key."""
    signed = f"{timestamp}{token}".encode()
    return hmac.new(signing_key.encode(), signed, hashlib.sha256).hexdigest()


def verify(
    data: dict[str, Any],
    *,
    signing_key: str | None,
    parent_signing_key: str | None = None,
    now_epoch_seconds: float,
    tolerance_seconds: float,
) -> str:
    """Check the signature block; return its token (the request's key against replays)."""
    block = data.get("signature")
    block = block if isinstance(block, dict) else {}
    timestamp, token = block.get("timestamp"), block.get("token")
    if not all(isinstance(value, str) and value for value in (timestamp, token)):
        raise EventRejected("signature.timestamp, token and signature are required", 401)
    if not _TIMESTAMP.match(timestamp):
        raise EventRejected("signature.timestamp must be Unix seconds", 401)
    if abs(now_epoch_seconds - int(timestamp)) > tolerance_seconds:
        raise EventRejected("signature.timestamp is outside the replay window", 401)
    pairs = (
        (signing_key, block.get("signature")),
        (parent_signing_key, block.get("parent-signature")),
    )
    if not any(_matches(key, timestamp, token, given) for key, given in pairs):
        raise EventRejected("the signature does not match", 401)
    return token


def _matches(key: str | None, timestamp: str, token: str, given: Any) -> bool:
    if not key or not isinstance(given, str) or not given:
        return False
    expected = compute_signature(key, timestamp, token)
    return hmac.compare_digest(expected.encode(), given.strip().lower().encode())


def parse_event(data: dict[str, Any]) -> ReportedEvent:
    """Read the ``event-data`` of a verified request; EventRejected (400) says what is wrong."""
    event = data.get("event-data")
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        raise EventRejected("'event-data' with an 'event' is required")
    event_id = clip(event.get("id"), 255)
    if event_id is None:
        raise EventRejected("'event-data.id' is required")
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
    header_id = clip(headers.get("message-id"), 253)
    return ReportedEvent(
        source=SOURCE,
        source_event_id=event_id,
        recipient=clip(event.get("recipient"), 320),
        provider_message_id=header_id.strip("<>") if header_id else None,
        message_id=normalize_message_id(header_id),
        reference=reference_in(event.get("user-variables")),
        occurred_at=parse_epoch(event.get("timestamp")),
        payload=event,
        **_facts(event),
    )


def _facts(event: dict[str, Any]) -> dict[str, Any]:
    kind = event["event"].lower()
    status = event.get("delivery-status")
    status = status if isinstance(status, dict) else {}
    diagnostic = _diagnostic(status)
    if kind in _SIMPLE:
        return {"event_type": _SIMPLE[kind], "diagnostic": diagnostic}
    reason = clip(event.get("reason"), 50)
    if kind == "failed" and event.get("severity") == "temporary":
        return {"event_type": DELAYED, "subtype": reason, "diagnostic": diagnostic}
    if kind == "failed" and reason in NEVER_TRIED:
        return {"event_type": REJECTED, "subtype": reason, "suppress_as": ACCOUNT_REASON,
                "diagnostic": f"Mailgun did not send it ({reason}): {diagnostic}"}  # fmt: skip
    if kind == "failed":
        code = status.get("code")
        permanent = not isinstance(code, int) or 500 <= code < 600
        return {"event_type": BOUNCED, "bounce_type": PERMANENT if permanent else TRANSIENT,
                "subtype": reason, "diagnostic": diagnostic}  # fmt: skip
    if kind == "rejected":
        reject = event.get("reject") if isinstance(event.get("reject"), dict) else {}
        why = clip(reject.get("reason"), 500) or clip(reject.get("description"), 500)
        return {"event_type": REJECTED, "diagnostic": f"Mailgun rejected it: {why or 'no reason'}"}
    name = re.sub(r"[^a-z0-9_]+", "_", kind)[:MAX_EVENT_TYPE_LENGTH]
    return {"event_type": name or "unknown"}


def _diagnostic(status: dict[str, Any]) -> str | None:
    parts = [status.get("code"), status.get("enhanced-code"), status.get("message")]
    text = " ".join(str(part) for part in parts if part not in (None, ""))
    return clip(text or status.get("description"), 1000)
