"""One event in each provider's own shape for the demo, so ``/events`` shows every source.

SES (through SNS), Resend, Postmark, Mailgun and SendGrid each report one
event about mail the demo sent earlier, in the shape that provider posts it.
Each payload goes through the same parser its endpoint uses and is recorded
like a verified request; none of them suppresses anyone. Fixed event ids make
a second run add nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence

from sqlalchemy.orm import Session

from console.events import ReportedEvent, mailgun, postmark, resend, sendgrid, ses
from console.models import utcnow
from console.store.intents import intent_by_key
from console.store.provider_events import record_events


@dataclasses.dataclass(frozen=True)
class SentMail:
    """Mail the demo handed over earlier: who to, the provider's id, our Message-ID."""

    recipient: str
    provider_message_id: str
    message_id: str | None = None  # with its angle brackets


PLACEHOLDER = SentMail("demo.recipient@example.com", "DEMO-PROVIDER-1")


def sent_mail(session: Session, keys: Sequence[str]) -> list[SentMail]:
    """The intents of `keys` that a provider already took, as SentMail (no commit)."""
    found = []
    for key in keys:
        intent = intent_by_key(session, key)
        if intent is not None and intent.provider_message_id:
            found.append(SentMail(intent.recipient, intent.provider_message_id, intent.message_id))
    return found


def seed_provider_shapes(
    session: Session, sent: Sequence[SentMail], now: dt.datetime | None = None
) -> int:
    """Record one event per provider about `sent` (round robin); return how many were new."""
    now = now or utcnow()
    builders = (_ses, _resend, _postmark, _mailgun, _sendgrid)
    mail = list(sent) or [PLACEHOLDER]
    events = [
        build(mail[number % len(mail)], now - dt.timedelta(minutes=50 - 10 * number))
        for number, build in enumerate(builders)
    ]
    return record_events(session, events, now=now).inserted


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ses(mail: SentMail, at: dt.datetime) -> ReportedEvent:
    """SES event publishing's Send record ("Send" proves SES took the message)."""
    notification = {
        "eventType": "Send",
        "mail": {
            "timestamp": _iso(at),
            "source": "noreply@outbox.localhost",
            "messageId": mail.provider_message_id,
            "destination": [mail.recipient],
            "headersTruncated": False,
        },
        "send": {},
    }
    [event] = ses.parse_notification("demo-ses-send-1", json.dumps(notification), _iso(at))
    return event


def _resend(mail: SentMail, at: dt.datetime) -> ReportedEvent:
    """Resend's email.delivery_delayed (its example's shape)."""
    event = {
        "type": "email.delivery_delayed",
        "created_at": _iso(at),
        "data": {
            "created_at": _iso(at - dt.timedelta(minutes=2)),
            "email_id": mail.provider_message_id,
            "from": "Outbox Console <noreply@outbox.localhost>",
            "to": [mail.recipient],
            "subject": "Your order",
        },
    }
    return resend.parse_event("msg_demo_delayed_1", json.dumps(event).encode())


def _postmark(mail: SentMail, at: dt.datetime) -> ReportedEvent:
    """Postmark's Delivery record."""
    record = {
        "RecordType": "Delivery",
        "ServerID": 23,
        "MessageStream": "outbound",
        "MessageID": mail.provider_message_id,
        "Recipient": mail.recipient,
        "DeliveredAt": _iso(at),
        "Details": "smtp;250 2.0.0 OK",
    }
    event = postmark.parse_record(json.dumps(record).encode())
    # its id names the delivery time; the demo's is "now", so the id is fixed instead
    return dataclasses.replace(event, source_event_id="Delivery:demo-postmark-1")


def _mailgun(mail: SentMail, at: dt.datetime) -> ReportedEvent:
    """Mailgun's delivered event-data; it names the message by its Message-ID header."""
    header = (mail.message_id or f"<{mail.provider_message_id}@outbox.localhost>").strip("<>")
    data = {
        "event-data": {
            "id": "demo-mailgun-delivered-1",
            "event": "delivered",
            "timestamp": at.timestamp(),
            "recipient": mail.recipient,
            "message": {"headers": {"to": mail.recipient, "message-id": header}},
            "delivery-status": {"code": 250, "message": "OK", "attempt-no": 1},
        }
    }
    return mailgun.parse_event(data)


def _sendgrid(mail: SentMail, at: dt.datetime) -> ReportedEvent:
    """SendGrid's delivered event, as one event of a batch."""
    batch = [
        {
            "email": mail.recipient,
            "event": "delivered",
            "timestamp": int(at.timestamp()),
            "response": "250 OK",
            "sg_event_id": "demo-sendgrid-delivered-1",
            "sg_message_id": f"{mail.provider_message_id}.filter0001.demo.0",
        }
    ]
    [event] = sendgrid.parse_batch(json.dumps(batch).encode())
    return event
