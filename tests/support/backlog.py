"""Backlogs queued straight into the intent table, as another application would."""

from __future__ import annotations

import datetime as dt
import uuid

from sqlalchemy import Engine, insert, text

from console.models import Intent, utcnow
from console.outbox import new_message_id
from console.vocabulary import BULK, PENDING

WELCOME_PARAMS = '{"name": "Ada", "login_url": "https://shop.example.com/login"}'
RECIPIENT_DOMAINS = 500  # spread, so a 4yz run rarely defers a whole domain


def insert_bulk_backlog(session_factory, count: int) -> None:
    """Queue `count` bulk intents directly, as an application in another language would."""
    now = utcnow() - dt.timedelta(minutes=5)
    rows = [
        dict(
            idempotency_key=f"newsletter:{n}",
            message_id=f"<{uuid.uuid4().hex}@test.example>",
            recipient=f"reader{n}@example.com",
            template="welcome",
            template_version=1,
            params={"name": f"Reader {n}", "login_url": "https://example.com/login"},
            status=PENDING,
            lane=BULK,
            attempt_count=0,
            next_attempt_at=now,
            created_at=now,
        )
        for n in range(count)
    ]
    with session_factory() as session:
        session.execute(insert(Intent), rows)
        session.commit()


def queue_orders(session_factory, count: int) -> None:
    """Queue `count` order confirmations in one transaction, as rows enqueue() would write."""
    now = utcnow() - dt.timedelta(seconds=1)
    rows = [
        dict(
            idempotency_key=f"order:{n}:confirmation",
            message_id=new_message_id("test.example"),
            recipient=f"buyer{n}@example.com",
            template="order-confirmation",
            template_version=1,
            params={
                "customer_name": f"Buyer {n}",
                "order_number": f"A-{n}",
                "items": [{"quantity": 1, "name": "Tea", "price": "3.00"}],
                "total": "3.00",
            },
            status=PENDING,
            lane=BULK,
            attempt_count=0,
            next_attempt_at=now,
            created_at=now,
        )
        for n in range(count)
    ]
    with session_factory() as session:
        session.execute(insert(Intent), rows)
        session.commit()


def recipient(number: int) -> str:
    return f"user{number}@d{number % RECIPIENT_DOMAINS}.example"


def bulk_insert_intents(
    engine: Engine, first: int, count: int, *, lane: str = "bulk", template: str = "welcome"
) -> None:
    """Insert intents first..first+count-1 as an application would, with one INSERT."""
    params = WELCOME_PARAMS if template == "welcome" else '{"code": "123456"}'
    statement = text(
        f"""
        INSERT INTO email_intent (idempotency_key, message_id, event, recipient, template,
            template_version, params, status, lane, attempt_count, next_attempt_at,
            created_at, updated_at)
        SELECT 'scale:' || n, '<scale-' || n || '@outbox.test>', 'scale:' || n,
            'user' || n || '@d' || (n % {RECIPIENT_DOMAINS}) || '.example', :template, 1,
            '{params}', 'pending', :lane, 0, now(), now(), now()
        FROM generate_series(CAST(:first AS integer), CAST(:last AS integer)) AS n"""
    )
    with engine.begin() as connection:
        connection.execute(
            statement,
            {"first": first, "last": first + count - 1, "lane": lane, "template": template},
        )
