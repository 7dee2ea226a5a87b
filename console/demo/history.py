"""The demo's history: yesterday's mail with what the provider reported about it, a reset
link an application superseded, one too old to send, and a signed webhook to post by hand.

Seeded once: keys and provider event ids make a second run add nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex

from sqlalchemy.orm import Session

from console.demo.seeded_history import record_earlier_send
from console.events import BOUNCED, COMPLAINED, DELIVERED, PERMANENT, ReportedEvent
from console.events.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER
from console.models import utcnow
from console.outbox import enqueue, supersede
from console.store.provider_events import record_events

BOUNCED_ADDRESS = "gone.mailbox@example.com"
COMPLAINED_ADDRESS = "annoyed@example.com"
SOURCE = "webhook"


def _order(number: int, name: str) -> dict:
    return {
        "customer_name": name,
        "order_number": str(number),
        "items": [{"quantity": 2, "name": "Notebook", "price": "4.50"}],
        "total": "9.00",
    }


# key, event, recipient, template, params, provider id: sent yesterday
EARLIER_MAIL = [
    ("order:991:confirmation", "order:991", "ada@example.com", "order-confirmation",
     _order(991, "Ada"), "DEMO-EARLIER-991"),
    ("user:15:welcome", "user:15:signup", "grace@example.com", "welcome",
     {"name": "Grace", "login_url": "https://shop.example.com/login"}, "DEMO-EARLIER-U15"),
    ("order:992:confirmation", "order:992", BOUNCED_ADDRESS, "order-confirmation",
     _order(992, "Gone"), "DEMO-EARLIER-992"),
    ("order:993:confirmation", "order:993", COMPLAINED_ADDRESS, "order-confirmation",
     _order(993, "Annoyed"), "DEMO-EARLIER-993"),
    ("order:994:confirmation", "order:994", "margaret@example.com", "order-confirmation",
     _order(994, "Margaret"), "DEMO-EARLIER-994"),
    ("order:995:confirmation", "order:995", "linus@example.com", "order-confirmation",
     _order(995, "Linus"), "DEMO-EARLIER-995"),
    ("user:16:welcome", "user:16:signup", "edsger@example.com", "welcome",
     {"name": "Edsger", "login_url": "https://shop.example.com/login"}, "DEMO-EARLIER-U16"),
    ("order:996:confirmation", "order:996", "barbara@example.com", "order-confirmation",
     _order(996, "Barbara"), "DEMO-EARLIER-996"),
]  # fmt: skip
# The earlier mail each provider's own shape reports on (console.demo.provider_shapes, in
# its order: SES's send, Resend's delay, then three deliveries): each delivery of a mail
# no other event reports delivered, so the history counts no second delivery.
PROVIDER_REPORTED_KEYS = [
    "order:991:confirmation",
    "order:994:confirmation",
    "order:995:confirmation",
    "user:16:welcome",
    "order:996:confirmation",
]
# source event id, type, recipient, provider id, bounce type, diagnostic
EVENTS = [
    ("demo-delivery-991", DELIVERED, "ada@example.com", "DEMO-EARLIER-991", None, None),
    ("demo-delivery-u15", DELIVERED, "grace@example.com", "DEMO-EARLIER-U15", None, None),
    ("demo-bounce-992", BOUNCED, BOUNCED_ADDRESS, "DEMO-EARLIER-992", PERMANENT,
     "smtp; 550 5.1.1 <gone.mailbox@example.com>: user unknown"),
    ("demo-complaint-993", COMPLAINED, COMPLAINED_ADDRESS, "DEMO-EARLIER-993", None, "abuse"),
    ("demo-delivery-unknown", DELIVERED, "stranger@example.com", "DEMO-NOT-OURS-7", None, None),
]  # fmt: skip
EVENT_IDS = [event[0] for event in EVENTS]
SUPERSEDED = ("user:18:password-reset:0", "user:18:password-reset", "linus@example.com",
              {"name": "Linus", "reset_url": "https://shop.example.com/reset/old"})  # fmt: skip
TOO_OLD = ("user:21:password-reset:1", "user:21:password-reset", "margaret@example.com",
           {"name": "Margaret", "reset_url": "https://shop.example.com/reset/late"})  # fmt: skip


def seed_history(session: Session, now: dt.datetime | None = None) -> None:
    """Add the demo's history to `session` (no commit); a second run adds nothing."""
    now = now or utcnow()
    yesterday = now - dt.timedelta(days=1)
    for number, (key, event, to, template, params, provider_id) in enumerate(EARLIER_MAIL):
        intent = enqueue(session, key=key, event=event, to=to, template=template, params=params)
        session.flush()
        sent_at = yesterday + dt.timedelta(minutes=7 * number)
        record_earlier_send(session, intent.id, provider_message_id=provider_id, sent_at=sent_at)
    reported = [
        ReportedEvent(
            source=SOURCE,
            source_event_id=event_id,
            event_type=kind,
            recipient=recipient,
            provider_message_id=provider_id,
            bounce_type=bounce_type,
            diagnostic=diagnostic,
            occurred_at=yesterday + dt.timedelta(hours=1, minutes=number),
            payload={"id": event_id, "type": kind, "demo": True},
        )
        for number, (event_id, kind, recipient, provider_id, bounce_type, diagnostic) in (
            enumerate(EVENTS)
        )
    ]
    record_events(session, reported, now=now)
    key, event, to, params = SUPERSEDED  # an application asked for a newer link
    enqueue(session, key=key, event=event, to=to, template="password-reset", params=params)
    supersede(session, key=key, reason="a newer reset link was requested")
    key, event, to, params = TOO_OLD  # a reset link is useless after 30 minutes
    intent = enqueue(session, key=key, event=event, to=to, template="password-reset", params=params)
    if intent.created_at >= now - dt.timedelta(minutes=1):
        intent.created_at = now - dt.timedelta(hours=1)


def webhook_curl(base_url: str, secret: str, message_id: str, recipient: str) -> str:
    """One shell line that signs a delivery event for `message_id` and posts it.

    It signs when pasted (openssl), so it stays valid however late it is run; each
    run sends a new event id.
    """
    fields = {"type": DELIVERED, "recipient": recipient, "message_id": message_id}
    rest = json.dumps(fields, separators=(",", ":"))[1:]
    body = '\'{"id":"demo-curl-\'"$ts"\'",\'' + shlex.quote(rest)  # the id, then the rest
    return (
        f"ts=$(date +%s); body={body}; "
        f'sig=$(printf \'%s.%s\' "$ts" "$body" | openssl dgst -sha256 -hmac '
        f"{shlex.quote(secret)} -r | cut -d' ' -f1); "
        f"curl -sS -X POST {shlex.quote(base_url + '/webhooks/generic')} "
        "-H 'Content-Type: application/json' "
        f'-H "{TIMESTAMP_HEADER}: $ts" -H "{SIGNATURE_HEADER}: $sig" --data-raw "$body"'
    )
