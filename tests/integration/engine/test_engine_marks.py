"""The engines (SQLite, PostgreSQL): the data_sent mark is committed when it returns
and refused when the recipient is suppressed or the attempt swept; on PostgreSQL the event
loop goes on while the database answers, a lost connection or a statement past its
deadline fails that write alone, and the next write starts on a fresh connection."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from sqlalchemy import insert, text, update
from sqlalchemy.exc import DBAPIError

from console.engine import SUPPRESSED, SWEPT
from console.engine import postgres as engine_postgres
from console.models import Attempt, Suppression
from console.vocabulary import CLAIMED, DATA_SENT
from tests.support.claim_steps import T0, claim_all, queue
from tests.support.claim_steps import on_engine as on_store

HOLD_SECONDS = 0.3
PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


def leased_attempts(session_factory, session, count: int) -> list[tuple[int, str]]:
    """`count` intents leased: (attempt id, recipient) each."""
    for _ in range(count):
        queue(session_factory)
    held = claim_all(session)
    return [(claim.attempt_id, claim.intent.recipient) for claim in held]


def stage_of(session_factory, attempt_id: int) -> str:
    with session_factory() as session:
        return session.get(Attempt, attempt_id).stage


BACKEND_PID = "SELECT pg_backend_pid()"  # the server's end of the statement's connection


def hold_row_lock(engine, attempt_id: int, seconds: float = HOLD_SECONDS) -> threading.Thread:
    """Lock the attempt's row in another transaction for `seconds`; return once held (the
    thread holding it, for the test to join)."""
    locked = threading.Event()

    def hold() -> None:
        with engine.connect() as connection:
            query = text("SELECT id FROM email_attempt WHERE id = :id FOR UPDATE")
            connection.execute(query, {"id": attempt_id})
            locked.set()
            time.sleep(seconds)
            connection.commit()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(10)
    return holder


def test_marks_commit_and_a_suppressed_or_swept_one_is_refused_with_nothing_marked(
    engine, session_factory, session
):
    (suppressed, address), (swept, other), (fine, third) = leased_attempts(
        session_factory, session, 3
    )
    with engine.begin() as connection:
        connection.execute(
            insert(Suppression).values(recipient=address, reason="bounce", created_at=T0)
        )
        connection.execute(update(Attempt).where(Attempt.id == swept).values(finished_at=T0))

    async def marks(store):
        return await asyncio.gather(
            *(store.mark(a, r) for a, r in [(suppressed, address), (swept, other), (fine, third)])
        )

    assert on_store(engine, marks) == [SUPPRESSED, SWEPT, None]
    stages = [stage_of(session_factory, a) for a in (suppressed, swept, fine)]
    assert stages == [CLAIMED, CLAIMED, DATA_SENT]


@PG
def test_a_mark_is_committed_when_it_returns_and_the_loop_goes_on_meanwhile(
    engine, session_factory, session
):
    [(attempt_id, recipient)] = leased_attempts(session_factory, session, 1)
    holder = hold_row_lock(engine, attempt_id)  # the mark waits for the lock: HOLD_SECONDS
    ticks: list[float] = []

    async def mark_while_ticking(store):
        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        try:
            return await store.mark(attempt_id, recipient)
        finally:
            ticking.cancel()

    assert on_store(engine, mark_while_ticking) is None
    holder.join()
    assert stage_of(session_factory, attempt_id) == DATA_SENT, "committed"
    assert len(ticks) >= 10, "the event loop went on while PostgreSQL held the mark"


@PG
def test_a_connection_lost_mid_mark_raises_and_a_fresh_one_marks(engine, session_factory, session):
    (first, recipient), (second, other) = leased_attempts(session_factory, session, 2)

    async def lost_then_fresh(store):
        await store.mark(second, other)  # the connection is open
        _, [(pid,)] = await store._run(BACKEND_PID, {}, "pid")
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(DBAPIError):
            await store.mark(first, recipient)
        return await store.mark(first, recipient)

    assert on_store(engine, lost_then_fresh) is None
    assert stage_of(session_factory, first) == DATA_SENT


@PG
def test_a_mark_past_its_deadline_fails_unmarked_and_the_next_one_marks(
    engine, session_factory, session, monkeypatch
):
    (stuck, recipient), (after, other) = leased_attempts(session_factory, session, 2)
    monkeypatch.setattr(engine_postgres, "STATEMENT_SECONDS", 0.2)
    holder = hold_row_lock(engine, stuck, seconds=1.0)

    async def past_deadline(store):
        started = time.monotonic()
        with pytest.raises(DBAPIError):
            await store.mark(stuck, recipient)
        assert time.monotonic() - started < 1.5, "cancelled at its deadline"
        return await store.mark(after, other)

    assert on_store(engine, past_deadline) is None
    holder.join()
    assert stage_of(session_factory, stuck) == CLAIMED, "cancelled in the server"
    assert stage_of(session_factory, after) == DATA_SENT


@PG
def test_a_cancelled_mark_leaves_the_connection_usable(engine, session_factory, session):
    (held, recipient), (after, other) = leased_attempts(session_factory, session, 2)
    holder = hold_row_lock(engine, held, seconds=1.0)

    async def cancelled_then_next(store):
        waiting = asyncio.create_task(store.mark(held, recipient))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return await store.mark(after, other)

    assert on_store(engine, cancelled_then_next) is None
    holder.join()
    assert stage_of(session_factory, held) == CLAIMED, "psycopg cancelled it in the server"
    assert stage_of(session_factory, after) == DATA_SENT
