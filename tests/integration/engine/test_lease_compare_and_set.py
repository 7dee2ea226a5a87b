"""The lease token's compare-and-set, against each send store's record on SQLite and PostgreSQL.

A worker claims an intent, goes silent, its lease is swept and another worker claims the
intent anew; when the first worker finally records its outcome, nothing changes.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.store import claims, records
from console.vocabulary import (
    ACCEPTED,
    CLAIMED,
    PENDING,
    REPLY_READ,
    SENDING,
    SUBMITTED,
    TRANSIENT,
)
from tests.support.claim_steps import in_claim, on_engine

LEASE = dt.timedelta(seconds=60)
ORDER_PARAMS = {
    "customer_name": "Ada",
    "order_number": "1234",
    "total": "3.00",
    "items": [{"quantity": 1, "name": "Tea", "price": "3.00"}],
}


def claim_one(session_factory, now: dt.datetime, worker_id: str) -> claims.Claim:
    limits = claims.lane_limits_within(1, None)

    async def lease_one(steps):
        due = await steps.lock_due(now, 1, limits)
        return await steps.lease(due, now, now + LEASE, worker_id)

    [claim] = in_claim(session_factory.kw["bind"], lease_one)
    return claim


def sweep(database, now: dt.datetime) -> None:
    """Take back the silent worker's lease; its attempt never left CLAIMED: pending again."""

    def judge(lease, now):
        assert lease.stage == CLAIMED
        verdict = Classification(TRANSIENT, "lease expired before anything was sent")
        return verdict, Decision(PENDING, "lease expired before anything was sent", now)

    assert len(on_engine(database, lambda engine: engine.sweep(now, judge))) == 1


def record_on_store(database, values) -> bool:
    """The engine's record of `values`, on an engine of its own."""
    return on_engine(database, lambda engine: engine.record(values))


def test_a_swept_worker_records_nothing_once_another_worker_holds_the_intent(
    engine, session_factory
):
    with session_factory() as session:
        intent_id = enqueue(
            session,
            key="order:1234:confirmation",
            to="ada@example.com",
            template="order-confirmation",
            params=ORDER_PARAMS,
        ).id
        session.commit()
    T0 = utcnow() + dt.timedelta(seconds=1)  # noqa: N806 - the test's first instant
    silent = claim_one(session_factory, T0, "worker-a")
    sweep(engine, T0 + LEASE + dt.timedelta(seconds=1))
    current = claim_one(session_factory, T0 + LEASE + dt.timedelta(seconds=2), "worker-b")
    assert current.lease_token != silent.lease_token

    accepted = SendResult(REPLY_READ, code=250, reply_text="2.0.0 Ok: queued as Q1")
    late = T0 + LEASE + dt.timedelta(seconds=3)
    values = records.record_values(
        silent, accepted, Classification(ACCEPTED, "accepted"), Decision(SUBMITTED), late
    )
    recorded = record_on_store(engine, values)

    assert recorded is False
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        assert (intent.status, intent.lease_token) == (SENDING, current.lease_token)
        assert intent.submitted_at is None and intent.provider_message_id is None
        attempts = session.scalars(
            select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
        ).all()
    by_id = {attempt.id: attempt for attempt in attempts}
    assert current.attempt_id in by_id, "the current worker's attempt is there, untouched"
    live = by_id[current.attempt_id]
    assert (live.stage, live.finished_at, live.outcome) == (CLAIMED, None, None)
    for attempt in attempts:
        assert attempt.outcome != ACCEPTED and attempt.reply_code is None
