"""supersede(): cancel a mail not yet sent, in the caller's transaction — SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from console.models import Intent
from console.outbox import InvalidIntent, enqueue, supersede
from console.transports.memory import MemoryTransport
from console.vocabulary import (
    AMBIGUOUS,
    CANCELLED,
    DEAD,
    EXPIRED,
    FAILED,
    PENDING,
    SENDING,
    SUBMITTED,
    SUPPRESSED,
)

KEY = "order:1234:confirmation"
ORDER = dict(
    to="zoe@example.com",
    template="order-confirmation",
    params={"customer_name": "Zoë", "order_number": "1234", "items": [], "total": "€42.50"},
)


def add(session_factory, key: str = KEY, status: str = PENDING, **params) -> int:
    with session_factory() as session:
        intent = enqueue(session, key=key, **{**ORDER, "params": {**ORDER["params"], **params}})
        session.flush()
        session.execute(update(Intent).where(Intent.id == intent.id).values(status=status))
        session.commit()
        return intent.id


def stored(session_factory, intent_id: int) -> Intent:
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        session.expunge(intent)
        return intent


@pytest.mark.parametrize("status", [PENDING, FAILED, DEAD])
def test_supersede_cancels_a_mail_not_yet_sent_with_the_reason(session_factory, status):
    intent_id = add(session_factory, status=status)
    with session_factory() as session:
        assert supersede(session, key=KEY, reason="superseded by order:1234:confirmation:2")
        session.commit()
    intent = stored(session_factory, intent_id)
    assert intent.status == CANCELLED
    assert intent.status_reason == "superseded by order:1234:confirmation:2"


@pytest.mark.parametrize("status", [SENDING, SUBMITTED, AMBIGUOUS, EXPIRED, SUPPRESSED, CANCELLED])
def test_supersede_leaves_any_other_status_alone(session_factory, status):
    intent_id = add(session_factory, status=status)
    with session_factory() as session:
        assert supersede(session, key=KEY, reason="changed") is False
        session.commit()
    assert stored(session_factory, intent_id).status == status


def test_supersede_of_an_unknown_key_does_nothing(session_factory):
    intent_id = add(session_factory)
    with session_factory() as session:
        assert supersede(session, key="order:9999:confirmation", reason="changed") is False
        session.commit()
    assert stored(session_factory, intent_id).status == PENDING


def test_supersede_lives_or_dies_with_the_callers_transaction(session_factory):
    intent_id = add(session_factory)
    with session_factory() as session:
        assert supersede(session, key=KEY, reason="changed")
        assert stored(session_factory, intent_id).status == PENDING, "never commits"
        session.rollback()
    assert stored(session_factory, intent_id).status == PENDING


def test_supersede_updates_the_intent_the_session_already_holds(session_factory):
    with session_factory() as session:
        intent = enqueue(session, key=KEY, **ORDER)
        assert supersede(session, key=KEY, reason="changed")
        assert (intent.status, intent.status_reason) == (CANCELLED, "changed")
        session.commit()


@pytest.mark.parametrize(
    "arguments",
    [dict(key="", reason="changed"), dict(key=KEY, reason=""), dict(key=KEY, reason=7)],
    ids=["empty key", "empty reason", "reason not text"],
)
def test_supersede_refuses_bad_input(session_factory, arguments):
    intent_id = add(session_factory)
    with session_factory() as session:
        with pytest.raises(InvalidIntent):
            supersede(session, **arguments)
        assert supersede(session, key=KEY, reason="changed"), "the session stays usable"
        session.commit()
    assert stored(session_factory, intent_id).status == CANCELLED


def test_enqueue_then_supersede_sends_only_the_changed_content(session_factory, make_worker, clock):
    old_id = add(session_factory, total="€42.50")
    with session_factory() as session:  # the order changed: a new key, the old mail cancelled
        enqueue(
            session, key=f"{KEY}:2", **{**ORDER, "params": {**ORDER["params"], "total": "€50.00"}}
        )
        assert supersede(session, key=KEY, reason=f"superseded by {KEY}:2")
        session.commit()
    worker = make_worker(MemoryTransport())
    worker.run_once(clock())
    [sent] = worker.transport.sent
    assert sent.idempotency_key == f"{KEY}:2" and "€50.00" in sent.text
    assert stored(session_factory, old_id).status == CANCELLED
