"""SendGrid's signed Event Webhook: ECDSA signatures and batched events.

SendGrid signs ``timestamp + raw body`` with ECDSA P-256 / SHA-256 and sends
the base64 DER signature in ``X-Twilio-Email-Event-Webhook-Signature`` and
the Unix time in ``X-Twilio-Email-Event-Webhook-Timestamp``; the verification
key (Settings → Mail Settings → Signed Event Webhook) is base64 DER, or PEM.
The timestamp must be within the tolerance, and a request whose timestamp and
body were already recorded is a replay (``console.store.webhook_replay_keys``), whatever
the bytes of its signature: ECDSA's (r, s) and (r, n - s) both verify.

One request carries a JSON array of events, each recorded once by its
``sg_event_id``:

- ``processed`` → accepted; ``delivered`` → delivered; ``deferred`` → delayed;
- ``bounce`` → bounced: ``type: blocked`` is transient; otherwise permanent
  unless its status is 4.x.x;
- ``dropped`` → rejected (SendGrid never tried); for its own lists (``Bounced
  Address``, ``Spam Reporting Address``, ``Unsubscribed Address``, ``Invalid``)
  the address is suppressed here too (``sendgrid-account``);
- ``spamreport`` → complained; anything else is stored, nothing applied.

The provider id is ``sg_message_id`` up to ``.filter``/``.recvd``: the
``X-Message-Id`` an API send returns and the id SendGrid's SMTP relay names in
its ``250 Ok: queued as ...`` reply; the whole ``sg_message_id`` is tried too
(the form SendGrid's activity feed shows). ``smtp-id`` is the Message-ID the
message carried over SendGrid's SMTP relay, ours; SendGrid writes its own
there (``<X-Message-Id@ismtpd....sendgrid.net>``) for mail without one, so it
names an intent when one has exactly that Message-ID, and the local part of
one on a ``sendgrid.net`` host is tried as the provider id too: it is the only
id of the send in an event whose ``sg_message_id`` is just ``filter...``. Our
reference comes back as a top-level field (a unique argument, sent in
``X-SMTPAPI``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
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

SOURCE = "sendgrid"
SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
ACCOUNT_REASON = "sendgrid-account"
OWN_LISTS = ("Bounced Address", "Spam Reporting Address", "Unsubscribed Address", "Invalid")
MAX_EVENTS = 10_000
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_PROVIDER_ID = re.compile(r"\.(filter|recvd)")
_FILTER_ONLY = re.compile(r"^(filter|recvd)", re.IGNORECASE)  # no id of the send before it
_SENDGRID_SMTP_ID = re.compile(r"([^@\s]+)@[A-Za-z0-9.-]+\.sendgrid\.net", re.IGNORECASE)
_SIMPLE = {"processed": ACCEPTED, "delivered": DELIVERED, "spamreport": COMPLAINED}


def load_public_key(value: str):
    """The ECDSA P-256 public key of a base64 DER or PEM text; ValueError when it is not one."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    text = value.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = load_pem_public_key(text.encode())
        else:
            key = load_der_public_key(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, TypeError):
        raise ValueError("must be SendGrid's verification key (base64 DER or PEM)") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("must be an ECDSA P-256 public key")
    return key


def verify(
    *,
    public_key: str,
    signature: str | None,
    timestamp: str | None,
    body: bytes,
    now_epoch_seconds: float,
    tolerance_seconds: float,
) -> None:
    """Return quietly when the ECDSA signature over ``timestamp + body`` verifies; else raise."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    if not timestamp or not _TIMESTAMP.match(timestamp):
        raise EventRejected(f"{TIMESTAMP_HEADER} must be Unix seconds", 401)
    if not signature:
        raise EventRejected(f"{SIGNATURE_HEADER} is missing", 401)
    if abs(now_epoch_seconds - int(timestamp)) > tolerance_seconds:
        raise EventRejected(f"{TIMESTAMP_HEADER} is outside the replay window", 401)
    try:
        der = base64.b64decode(signature.strip(), validate=True)
        load_public_key(public_key).verify(
            der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256())
        )
    except (binascii.Error, ValueError, InvalidSignature):
        raise EventRejected("the signature does not verify", 401) from None


def replay_key(timestamp: str, body: bytes) -> str:
    """The key of a verified request: what was signed, never the signature itself."""
    return f"{timestamp}.{hashlib.sha256(body).hexdigest()}"


def parse_batch(body: bytes) -> list[ReportedEvent]:
    """Read a batch of SendGrid events; EventRejected (400) says what is wrong."""
    try:
        batch = load_json(body)
    except (UnicodeDecodeError, ValueError):
        raise EventRejected("the body is not JSON") from None
    if not isinstance(batch, list) or not all(isinstance(item, dict) for item in batch):
        raise EventRejected("the body must be a JSON array of events")
    if len(batch) > MAX_EVENTS:
        raise EventRejected(f"a batch holds at most {MAX_EVENTS} events")
    refuse_unstorable_text(batch)
    return [_event(item) for item in batch]


def _event(item: dict[str, Any]) -> ReportedEvent:
    kind = item.get("event")
    if not isinstance(kind, str) or not kind:
        raise EventRejected("each event needs an 'event'")
    sg_message_id = clip(item.get("sg_message_id"), 255)
    smtp_id = clip(item.get("smtp-id"), 255)
    provider_id, *other_ids = _provider_ids(sg_message_id, smtp_id) or [None]
    event_id = clip(item.get("sg_event_id"), 255) or ":".join(
        str(item.get(k)) for k in ("sg_message_id", "event", "email", "timestamp")
    )
    return ReportedEvent(
        source=SOURCE,
        source_event_id=event_id[:255],
        recipient=clip(item.get("email"), 320),
        provider_message_id=provider_id,
        other_provider_ids=tuple(other_ids),
        relay_message_id=normalize_message_id(smtp_id),
        reference=reference_in(item),
        occurred_at=parse_epoch(item.get("timestamp")),
        payload=item,
        **_facts(kind.lower(), item),
    )


def _provider_ids(sg_message_id: str | None, smtp_id: str | None) -> list[str]:
    """SendGrid's id of the send first, then the other spellings that may name it."""
    ids = []
    if sg_message_id and not _FILTER_ONLY.match(sg_message_id):
        ids.append(_PROVIDER_ID.split(sg_message_id)[0])
    relayed = _SENDGRID_SMTP_ID.fullmatch(smtp_id.strip("<> ")) if smtp_id else None
    if relayed:
        ids.append(relayed.group(1))
    if sg_message_id:
        ids.append(sg_message_id)
    return list(dict.fromkeys(i for i in ids if i))


def _facts(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    reason = clip(item.get("reason"), 1000)
    diagnostic = clip(item.get("response"), 1000) or reason
    if kind in _SIMPLE:
        return {"event_type": _SIMPLE[kind], "diagnostic": diagnostic}
    if kind == "deferred":
        return {"event_type": DELAYED, "diagnostic": diagnostic}
    if kind == "bounce":
        status = clip(item.get("status"), 20)
        transient = item.get("type") == "blocked" or (status is not None and status[0] == "4")
        return {"event_type": BOUNCED, "bounce_type": TRANSIENT if transient else PERMANENT,
                "subtype": clip(item.get("bounce_classification") or item.get("type"), 50),
                "diagnostic": " ".join(p for p in (status, reason) if p) or None}  # fmt: skip
    if kind == "dropped":
        fields = {"event_type": REJECTED, "subtype": clip(reason, 50),
                  "diagnostic": f"SendGrid dropped it: {reason or 'no reason given'}"}  # fmt: skip
        if reason in OWN_LISTS:
            fields["suppress_as"] = ACCOUNT_REASON
        return fields
    name = re.sub(r"[^a-z0-9_]+", "_", kind)[:MAX_EVENT_TYPE_LENGTH]
    return {"event_type": name or "unknown"}
