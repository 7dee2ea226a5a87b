"""The claim queries called as the worker calls them, on intents a test queues around T0."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools

from sqlalchemy import select, update

from console.engine import Engine, SqlKit, engine_for
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
    """The engine of the database `session` is on (its claim steps take `session`)."""
    return engine_for(session.get_bind())


def sql_of(session_factory) -> SqlKit:
    """How the database of `session_factory` spells what differs: its engine's ``sql``,
    as the worker hands it to the store."""
    return engine_for(session_factory.kw["bind"]).sql


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


def lock(session, limit=50, lane_limits=None, now=T0):
    """lock_due as the worker calls it: each lane's cap from `lane_limits_within`."""
    limits = claims.lane_limits_within(limit, lane_limits)
    return engine_of(session).lock_due(session, now, limit, limits)


def lease_all(session, due, *, now=T0, lease_seconds=LEASE_SECONDS):
    return engine_of(session).lease(session, due, now, now + seconds(lease_seconds), WORKER_ID)


def load(session_factory, intent_id):
    """The intent and its attempts, read in a transaction of their own."""
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        attempts = session.scalars(
            select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
        ).all()
        return intent, attempts
