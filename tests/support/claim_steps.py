"""The claim queries called as the worker calls them, on intents a test queues around T0."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from console.engine import Engine, engine_for
from console.models import Attempt, Intent
from console.outbox import enqueue
from console.store import claims
from console.vocabulary import BULK

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)  # the claim's `now` unless a test says
LEASE_SECONDS = 60
WORKER_ID = "host:1:abc123"
ORDER_PARAMS = {
    "customer_name": "Ada",
    "order_number": "1234",
    "total": "3.00",
    "items": [{"quantity": 1, "name": "Tea", "price": "3.00"}],
}
_numbers = itertools.count(1)


def seconds(n: float) -> dt.timedelta:
    return dt.timedelta(seconds=n)


def queue(session_factory, *, due=T0 - seconds(60), lane=BULK, **columns) -> int:
    """Enqueue an order confirmation, then give it `due` and any other column values."""
    number = next(_numbers)
    with session_factory() as session:
        intent = enqueue(
            session,
            key=f"order:{number}:confirmation",
            to=f"buyer{number}@example.com",
            template="order-confirmation",
            params=ORDER_PARAMS,
            lane=lane,
        )
        values = {"next_attempt_at": due, **columns}
        table = Intent.__table__
        session.execute(update(table).where(table.c.id == intent.id).values(**values))
        session.commit()
        return intent.id


def engine_of(session) -> Engine:
    """The engine of the database `session` is on."""
    return engine_for(session.get_bind())


def database_of(database_or_session):
    """The database of a test's `session`, or the database itself."""
    if isinstance(database_or_session, Session):
        return database_or_session.get_bind()
    return database_or_session


def on_engine(database, use, connections: int = 1):
    """Run ``use(engine)`` on a fresh engine of `database`; what it returned."""

    async def run():
        engine = engine_for(database, connections=connections)
        try:
            return await use(engine)
        finally:
            await engine.close()

    return asyncio.run(run())


def sweep(database, now, judge):
    """The engine's sweep at `now`, each lease judged by `judge(lease, now)`: those settled,
    with their decision."""
    return on_engine(database, lambda engine: engine.sweep(now, judge))


def give_back(database, returned, now=T0):
    """The engine's give-back of `returned` ((claim, due at) pairs): how many went back."""
    return on_engine(database, lambda engine: engine.give_back(returned, now))


def in_claim(database, use):
    """Run ``use(steps)`` in one claim transaction of a fresh engine of `database` (or of a
    test's session), committed when it returns; what it returned."""

    async def claim(engine):
        async with engine.claiming() as steps:
            return await use(steps)

    return on_engine(database_of(database), claim)


def lock(database, limit=50, lane_limits=None, now=T0):
    """lock_due as the worker calls it (each lane's cap from `lane_limits_within`), in a
    claim of its own."""
    limits = claims.lane_limits_within(limit, lane_limits)
    return in_claim(database, lambda steps: steps.lock_due(now, limit, limits))


def lease_all(database, due, *, now=T0, lease_seconds=LEASE_SECONDS):
    """Lease `due` (locked earlier) in a claim of its own."""
    expires_at = now + seconds(lease_seconds)
    return in_claim(database, lambda steps: steps.lease(due, now, expires_at, WORKER_ID))


def claim_all(database, *, now=T0, lease_seconds=LEASE_SECONDS, limit=50):
    """Lock the due intents and lease them, in one claim."""
    limits = claims.lane_limits_within(limit, None)
    expires_at = now + seconds(lease_seconds)

    async def claim(steps):
        due = await steps.lock_due(now, limit, limits)
        return await steps.lease(due, now, expires_at, WORKER_ID)

    return in_claim(database, claim)


def load(session_factory, intent_id):
    """The intent and its attempts, read in a transaction of their own."""
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        attempts = session.scalars(
            select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
        ).all()
        return intent, attempts
