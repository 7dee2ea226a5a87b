"""Sends that may have reached a person twice: counted by cause, shown on the intent's timeline.

The worker sends for real (in-memory transport) on SQLite and PostgreSQL: a login
code (``resend`` policy) resent after an unknown outcome, an order confirmation
(``hold``) resent by an operator, and a provider reporting a second delivery.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from console.core.send_result import SendResult
from console.models import Intent, ProviderEvent
from console.outbox import enqueue
from console.store import duplicate_sends, reconciliation
from console.transports.memory import MemoryTransport
from console.vocabulary import AMBIGUOUS, DATA_SENT, PENDING, SUBMITTED
from console.web.intent_story import intent_detail
from tests.support.orders import ORDER

NO_REPLY = SendResult(DATA_SENT, error="connection lost", error_type="SMTPServerDisconnected")


def enqueue_one(session_factory, key: str, to: str, **options) -> int:
    options = options or ORDER
    with session_factory() as session:
        intent_id = enqueue(session, key=key, to=to, **options).id
        session.commit()
    return intent_id


def test_every_cause_is_counted_and_shown_on_the_timeline(session_factory, make_worker, clock):
    start = clock()
    login = enqueue_one(session_factory, "login:1", "lee@example.com", template="login-code",
                        params={"code": "123456"})  # fmt: skip
    order = enqueue_one(session_factory, "order:1", "ola@example.com")
    single = enqueue_one(session_factory, "order:2", "sam@example.com")
    transport = MemoryTransport({"lee@example.com": [NO_REPLY], "ola@example.com": [NO_REPLY]})
    worker = make_worker(transport, random=0.0)
    worker.run_once()
    with session_factory() as session:
        assert session.get(Intent, login).status == PENDING  # resend policy: retried
        assert session.get(Intent, order).status == AMBIGUOUS  # hold: waits for an operator
        reconciliation.reconcile(session, order, resolution="resend", actor="ops",
                                 reason="customer says nothing came",
                                 now=clock.advance(60))  # fmt: skip
        session.commit()
    transport.script.clear()
    clock.advance(60)
    worker.run_once()
    with session_factory() as session:
        assert {session.get(Intent, i).status for i in (login, order, single)} == {SUBMITTED}
        for number in (1, 2):
            session.add(ProviderEvent(source="ses", source_event_id=f"d{number}",
                                      event_type="delivered", intent_id=single,
                                      received_at=clock.advance(1)))  # fmt: skip
        session.commit()

    with session_factory() as session:
        found = duplicate_sends.possible_duplicates(session, start, clock.advance(1))
        causes = {(d.intent_id, d.cause) for d in found}
        assert causes == {
            (login, duplicate_sends.AUTOMATIC_RESEND),
            (order, duplicate_sends.OPERATOR_RESEND),
            (single, duplicate_sends.SECOND_DELIVERY),
        }
        assert duplicate_sends.count_by_cause(found) == dict.fromkeys(duplicate_sends.CAUSES, 1)
        later = duplicate_sends.possible_duplicates(session, clock.advance(60), clock())
        assert later == []
        for intent_id in (login, order, single):
            titles = [entry.title for entry in intent_detail(session, intent_id).timeline]
            assert any(title.startswith("Possible duplicate") for title in titles), titles


def test_a_plain_retry_or_a_single_delivery_is_no_duplicate(session_factory, make_worker, clock):
    start = clock()
    busy = SendResult("envelope", code=451, reply_text="4.3.0 try again later")
    intent_id = enqueue_one(session_factory, "order:1", "ola@example.com")
    transport = MemoryTransport({"ola@example.com": [busy]})
    worker = make_worker(transport, random=0.0)
    worker.run_once()
    transport.script.clear()
    clock.advance(3600)
    worker.run_once()
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUBMITTED
        session.add(ProviderEvent(source="ses", source_event_id="d1", event_type="delivered",
                                  intent_id=intent_id, received_at=clock()))  # fmt: skip
        session.commit()
        until = clock() + dt.timedelta(seconds=1)
        assert duplicate_sends.possible_duplicates(session, start, until) == []
        titles = [entry.title for entry in intent_detail(session, intent_id).timeline]
        assert not any(title.startswith("Possible duplicate") for title in titles)
        assert session.scalars(select(ProviderEvent.id)).all()
