"""Postmark webhooks: HTTP basic auth and Postmark's record types.

Postmark signs nothing: the webhook URL carries credentials you choose
(``https://user:password@console.example.com/webhooks/postmark``) and Postmark
sends them as HTTP basic auth; both are compared in constant time. One record
per request, by ``RecordType``:

- ``Delivery`` → delivered; ``SpamComplaint`` → complained;
- ``Bounce`` → by its ``TypeCode`` (Postmark's bounce-type table, ``BOUNCE_CODES``);
- ``SubscriptionChange`` with ``SuppressSending`` → Postmark will not send to
  the address: suppressed here too (``postmark-account``); without it, stored;
- ``Open``, ``Click`` and others are stored, nothing applied; an inbound
  message is refused (it is not an event).

Bounce records carry an ``ID``; the others get an id made of what makes them
unique, so a redelivery is recorded once. The bounce dump (``Content``) is not kept.
Our reference comes back in ``Metadata`` (sent in ``X-PM-Metadata-outbox_ref``).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from typing import Any

from console.events import (
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    PERMANENT,
    REJECTED,
    TRANSIENT,
    UNDETERMINED,
    EventRejected,
    ReportedEvent,
    clip,
    load_json,
    parse_timestamp,
    refuse_unstorable_text,
)
from console.events.metadata import reference_in

SOURCE = "postmark"
ACCOUNT_REASON = "postmark-account"
REALM = 'Basic realm="outbox-console postmark webhook"'
DROPPED_FIELDS = ("Content",)  # a bounce's raw dump may hold the original message
FORBIDDEN = 403  # Postmark stops retrying a webhook answered 403

# Postmark's bounce types ("Bounce webhook", "Bounce types"): TypeCode -> (Type, fact, bounce type).
# Facts: a hard bounce suppresses; a soft one does not; a delay is "Transient";
# what is no failure of this message (auto-replies, subscribe requests...) is stored only.
BOUNCE_CODES: dict[int, tuple[str, str | None, str | None]] = {
    1: ("HardBounce", BOUNCED, PERMANENT),
    2: ("Transient", DELAYED, None),
    16: ("Unsubscribe", None, None),
    32: ("Subscribe", None, None),
    64: ("AutoResponder", None, None),
    128: ("AddressChange", None, None),
    256: ("DnsError", BOUNCED, TRANSIENT),
    512: ("SpamNotification", BOUNCED, UNDETERMINED),
    1024: ("OpenRelayTest", None, None),
    2048: ("Unknown", BOUNCED, UNDETERMINED),
    4096: ("SoftBounce", BOUNCED, TRANSIENT),
    8192: ("VirusNotification", BOUNCED, UNDETERMINED),
    16384: ("ChallengeVerification", None, None),
    100000: ("BadEmailAddress", BOUNCED, PERMANENT),
    100001: ("SpamComplaint", COMPLAINED, None),
    100002: ("ManuallyDeactivated", REJECTED, None),
    100003: ("Unconfirmed", REJECTED, None),
    100006: ("Blocked", BOUNCED, UNDETERMINED),
    100007: ("SMTPApiError", REJECTED, None),
    100008: ("InboundError", None, None),
    100009: ("DMARCPolicy", BOUNCED, UNDETERMINED),
    100010: ("TemplateRenderingFailed", REJECTED, None),
}
_CODES_BY_TYPE = {name: code for code, (name, _, _) in BOUNCE_CODES.items()}


def check_credentials(authorization: str | None, *, user: str, password: str) -> None:
    """Return quietly for the configured basic-auth credentials; else raise (401)."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise EventRejected("HTTP basic auth credentials are required", 401)
    try:
        given_user, _, given_password = base64.b64decode(encoded, validate=True).partition(b":")
    except (binascii.Error, ValueError):
        raise EventRejected("the basic auth credentials are not base64", 401) from None
    same_user = hmac.compare_digest(given_user, user.encode())
    same_password = hmac.compare_digest(given_password, password.encode())
    if not (same_user and same_password):
        raise EventRejected("the basic auth credentials do not match", 401)


def parse_record(body: bytes) -> ReportedEvent:
    """Read one Postmark webhook record; EventRejected (400) says what is wrong, and 403
    refuses text no database stores (in what is kept: the dump is dropped unread)."""
    try:
        record = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise EventRejected("the body is not JSON") from None
    if not isinstance(record, dict):
        raise EventRejected("the body must be one Postmark record")
    kind = record.get("RecordType")
    if kind == "Inbound" or "FromFull" in record:
        raise EventRejected(
            "an inbound message is not an event: point Postmark's inbound hook elsewhere"
        )
    if not isinstance(kind, str) or not kind:
        raise EventRejected("'RecordType' is required")
    payload = {key: value for key, value in record.items() if key not in DROPPED_FIELDS}
    refuse_unstorable_text(payload, FORBIDDEN)
    recipient = clip(record.get("Email") or record.get("Recipient"), 320)
    fields = _facts(kind, record)
    return ReportedEvent(
        source=SOURCE,
        source_event_id=_event_id(kind, record, recipient),
        recipient=recipient,
        provider_message_id=clip(record.get("MessageID"), 255),
        reference=reference_in(record.get("Metadata")),
        occurred_at=parse_timestamp(
            next(
                (
                    record[k]
                    for k in ("DeliveredAt", "BouncedAt", "ChangedAt", "ReceivedAt")
                    if isinstance(record.get(k), str)
                ),
                None,
            )  # fmt: skip
        ),
        payload=payload,
        **fields,
    )


def _facts(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    details = clip(record.get("Details"), 1000)
    if kind == "Delivery":
        return {"event_type": DELIVERED, "diagnostic": details}
    if kind == "SpamComplaint":  # whatever its TypeCode says (Postmark's examples disagree)
        return {"event_type": COMPLAINED, "subtype": "SpamComplaint", "diagnostic": details}
    if kind == "Bounce":
        return _bounce(record, details)
    if kind == "SubscriptionChange":
        reason = clip(record.get("SuppressionReason"), 50)
        if record.get("SuppressSending") is True:
            return {"event_type": "suppressed", "subtype": reason, "suppress_as": ACCOUNT_REASON,
                    "diagnostic": f"Postmark will not send to this address ({reason})"}  # fmt: skip
        return {"event_type": "reactivated", "subtype": reason}
    return {"event_type": _name(kind)}


def _bounce(record: dict[str, Any], details: str | None) -> dict[str, Any]:
    code = record.get("TypeCode")
    if not isinstance(code, int) or code not in BOUNCE_CODES:
        code = _CODES_BY_TYPE.get(record.get("Type"), 2048)  # Unknown
    type_name, fact, bounce_type = BOUNCE_CODES[code]
    diagnostic = details or clip(record.get("Description"), 1000)
    if fact is None:
        return {"event_type": _name(type_name), "subtype": type_name, "diagnostic": diagnostic}
    if fact == REJECTED:
        diagnostic = f"Postmark did not send it ({type_name}): {diagnostic or 'no details'}"
    fields = {"event_type": fact, "subtype": type_name, "diagnostic": diagnostic}
    if fact == BOUNCED:
        fields["bounce_type"] = bounce_type
    if type_name == "ManuallyDeactivated":
        fields["suppress_as"] = ACCOUNT_REASON
    return fields


def _event_id(kind: str, record: dict[str, Any], recipient: str | None) -> str:
    if kind in ("Bounce", "SpamComplaint") and record.get("ID") is not None:
        return f"{kind}:{record['ID']}"[:255]
    at = next((record[k] for k in ("DeliveredAt", "ChangedAt", "ReceivedAt") if record.get(k)), "")
    parts = [kind, record.get("MessageID"), recipient, at]
    if kind == "SubscriptionChange":
        parts.append(record.get("SuppressSending"))
    return ":".join(str(part) for part in parts if part is not None)[:255]


def _name(kind: str) -> str:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    return re.sub(r"[^a-z0-9_]+", "_", snake)[:MAX_EVENT_TYPE_LENGTH] or "unknown"
