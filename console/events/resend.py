"""Resend webhooks: Svix signatures and Resend's email events.

Verification follows Svix ("Verifying Webhooks Manually"): the secret is
``whsec_`` + base64 of the key; the signed content is
``"<svix-id>.<svix-timestamp>.<raw body>"``; ``svix-signature`` holds one or
more space-separated ``v1,<base64 HMAC-SHA256>`` entries (several while a
secret is rotated), any of which may match. The timestamp must be within the
tolerance. The unbranded ``webhook-id`` / ``webhook-timestamp`` /
``webhook-signature`` headers are read too.

One event per request (Resend's ``type``, ``created_at`` and ``data``); its id
is the ``svix-id``, the same on every retry. Resend names the message's
recipients (``data.to``), not the one an event is about: an event naming
several is recorded once for each (ids ``<svix-id>#1``, ``#2``...), as SES
events are. ``email.suppressed`` (Resend's account-level suppression list) and a
bounce of subtype ``Suppressed`` mean Resend never tried: rejected, and the
address suppressed here too (``resend-account``). Our reference comes back in
``data.tags``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import Any

from console.events import (
    ACCEPTED,
    BOUNCE_TYPES,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    PERMANENT,
    REJECTED,
    EventRejected,
    ReportedEvent,
    clip,
    load_json,
    normalize_message_id,
    parse_timestamp,
    refuse_unstorable_text,
    single_address,
)
from console.events.metadata import reference_in

SOURCE = "resend"
SECRET_PREFIX = "whsec_"
HEADER_NAMES = {  # ours -> (Svix's, the unbranded Standard Webhooks')
    "id": ("svix-id", "webhook-id"),
    "timestamp": ("svix-timestamp", "webhook-timestamp"),
    "signature": ("svix-signature", "webhook-signature"),
}
ACCOUNT_REASON = "resend-account"
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_EVENT_TYPES = {
    "email.sent": ACCEPTED,
    "email.delivered": DELIVERED,
    "email.delivery_delayed": DELAYED,
    "email.delivered_delayed": DELAYED,  # the spelling of an older example in Resend's docs
    "email.complained": COMPLAINED,
    "email.bounced": BOUNCED,
    "email.failed": REJECTED,
    "email.suppressed": REJECTED,
}


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a ``whsec_...`` secret; ValueError when it is not one."""
    encoded = secret.strip().removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("must be the whsec_... signing secret Resend shows (base64)") from None
    if not key:
        raise ValueError("must be the whsec_... signing secret Resend shows (base64)")
    return key


def sign(secret: str, message_id: str, timestamp: str, body: bytes) -> str:
    """The base64 ``v1`` signature Svix puts in ``svix-signature`` (without ``v1,``)."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(decode_secret(secret), signed, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def svix_headers(headers: Mapping[str, str]) -> dict[str, str | None]:
    """The id, timestamp and signature headers, Svix's names first."""
    return {
        ours: next((headers.get(name) for name in names if headers.get(name)), None)
        for ours, names in HEADER_NAMES.items()
    }


def verify(
    *,
    secret: str,
    message_id: str | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now_epoch_seconds: float,
    tolerance_seconds: float,
) -> None:
    """Return quietly when one of the signatures matches and the time is recent; else raise."""
    if not message_id or not signature:
        raise EventRejected("svix-id and svix-signature are required", 401)
    if not timestamp or not _TIMESTAMP.match(timestamp):
        raise EventRejected("svix-timestamp must be Unix seconds", 401)
    if abs(now_epoch_seconds - int(timestamp)) > tolerance_seconds:
        raise EventRejected("svix-timestamp is outside the replay window", 401)
    expected = sign(secret, message_id, timestamp, body).encode()
    for entry in signature.split():
        version, _, value = entry.partition(",")
        if version == "v1" and hmac.compare_digest(expected, value.encode()):
            return
    raise EventRejected("no svix-signature matches", 401)


def parse_event(message_id: str, body: bytes) -> ReportedEvent:
    """Read a Resend event about one recipient (the first, when it names several)."""
    return parse_events(message_id, body)[0]


def parse_events(message_id: str, body: bytes) -> list[ReportedEvent]:
    """Read one Resend event, one for each recipient; EventRejected (400) says what is wrong."""
    try:
        event = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise EventRejected("the body is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise EventRejected("the body must be one Resend event with a 'type'")
    refuse_unstorable_text(event)
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    common = {
        "source": SOURCE,
        "provider_message_id": clip(data.get("email_id"), 255),
        "message_id": normalize_message_id(_header(data, "message-id")),
        "reference": reference_in(data.get("tags")),
        "occurred_at": parse_timestamp(event.get("created_at")),
        "payload": event,
        **_facts(event["type"], data),
    }
    recipients = _recipients(data.get("to"))
    if len(recipients) < 2:
        return [ReportedEvent(source_event_id=message_id[:250], recipient=recipients[0], **common)]
    return [
        ReportedEvent(source_event_id=f"{message_id[:250]}#{n}", recipient=address, **common)
        for n, address in enumerate(recipients, start=1)
    ]


def _recipients(to: Any) -> list[str | None]:
    """Each address of ``data.to`` (a list or one text); [None] when it names none."""
    entries = to if isinstance(to, list) else [to]
    addresses = [single_address(entry) for entry in entries if isinstance(entry, str)]
    return [address for address in addresses if address] or [None]


def _facts(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    event_type = _EVENT_TYPES.get(kind)
    if event_type is None:
        name = re.sub(r"[^a-z0-9_]+", "_", kind.lower().removeprefix("email."))
        return {"event_type": name.strip("_")[:MAX_EVENT_TYPE_LENGTH] or "unknown"}
    if event_type == BOUNCED:
        return _bounce(data.get("bounce") if isinstance(data.get("bounce"), dict) else {})
    if kind == "email.suppressed":
        return _suppressed(
            data.get("suppressed") if isinstance(data.get("suppressed"), dict) else {}
        )
    if event_type == REJECTED:
        failed = data.get("failed") if isinstance(data.get("failed"), dict) else {}
        reason = clip(failed.get("reason"), 500) or "no reason given"
        return {"event_type": REJECTED, "diagnostic": f"Resend could not send it: {reason}"}
    return {"event_type": event_type}


def _suppressed(suppressed: dict[str, Any]) -> dict[str, Any]:
    """Resend did not send it: the address is on its account-level suppression list."""
    subtype = clip(suppressed.get("type"), 50) or "Suppressed"
    message = clip(suppressed.get("message"), 900) or "the address is on its suppression list"
    return {"event_type": REJECTED, "subtype": subtype, "suppress_as": ACCOUNT_REASON,
            "diagnostic": f"Resend did not send it ({subtype}): {message}"}  # fmt: skip


def _bounce(bounce: dict[str, Any]) -> dict[str, Any]:
    """A bounce; Resend's own suppression list ("Suppressed") means it never tried."""
    message = clip(bounce.get("message"), 1000)
    subtype = clip(bounce.get("subType"), 50)
    codes = bounce.get("diagnosticCode")
    if isinstance(codes, list):
        codes = " ".join(str(code) for code in codes)
    diagnostic = " ".join(part for part in (clip(codes, 1000), message) if part) or None
    if subtype == "Suppressed" or (message and "suppressed sending" in message):
        return {"event_type": REJECTED, "subtype": subtype or "Suppressed",
                "diagnostic": diagnostic, "suppress_as": ACCOUNT_REASON}  # fmt: skip
    bounce_type = str(bounce.get("type") or PERMANENT).lower()
    return {
        "event_type": BOUNCED,
        "bounce_type": bounce_type if bounce_type in BOUNCE_TYPES else PERMANENT,
        "subtype": subtype,
        "diagnostic": diagnostic,
    }


def _header(data: dict[str, Any], wanted: str) -> Any:
    for header in data.get("headers") or []:
        if isinstance(header, dict) and str(header.get("name", "")).lower() == wanted:
            return header.get("value")
    return None
