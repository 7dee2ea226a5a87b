"""The data_sent mark on PostgreSQL's socket (next door): committed before ``mark`` returns,
refused as the driver's mark refuses, one statement at a time, while the event loop goes
on with the other sends."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from sqlalchemy import insert, text, update
from sqlalchemy.exc import DBAPIError

from console.models import Attempt, Suppression
from console.store import records
from console.store.pg_socket import SocketMarks
from console.vocabulary import CLAIMED, DATA_SENT
from tests.support.claim_steps import T0, lease_all, lock, queue

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

HOLD_SECONDS = 0.3


def leased_attempts(session_factory, session, count: int) -> list[tuple[int, str]]:
    """`count` intents leased: (attempt id, recipient) each."""
    for _ in range(count):
        queue(session_factory)
    held = lease_all(session, lock(session))
    session.commit()
    return [(claim.attempt_id, claim.intent.recipient) for claim in held]


def stage_of(session_factory, attempt_id: int) -> str:
    with session_factory() as session:
        return session.get(Attempt, attempt_id).stage


def marked(engine, attempts, **timed) -> list[bool]:
    """Mark each of `attempts` at once on one connection; what each mark answered."""
    connection = records.writer(engine)
    seconds: list[float] = timed.get("seconds", [])
    try:
        socket_marks = SocketMarks(connection)

        async def all_marks():
            return await asyncio.gather(
                *(socket_marks.mark(a, [r], seconds.append) for a, r in attempts)
            )

        return asyncio.run(all_marks())
    finally:
        connection.close()


def hold_row_lock(engine, attempt_id: int) -> threading.Event:
    """Lock the attempt's row in another transaction for HOLD_SECONDS; set once held."""
    locked = threading.Event()

    def hold() -> None:
        with engine.connect() as connection:
            query = text("SELECT id FROM email_attempt WHERE id = :id FOR UPDATE")
            connection.execute(query, {"id": attempt_id})
            locked.set()
            time.sleep(HOLD_SECONDS)
            connection.commit()

    threading.Thread(target=hold, daemon=True).start()
    assert locked.wait(10)
    return locked


def test_a_mark_is_committed_when_it_returns_and_the_loop_goes_on_meanwhile(
    engine, session_factory, session
):
    [(attempt_id, recipient)] = leased_attempts(session_factory, session, 1)
    hold_row_lock(engine, attempt_id)  # the mark waits for the lock: HOLD_SECONDS
    connection = records.writer(engine)
    ticks: list[float] = []
    seconds: list[float] = []

    async def mark_while_ticking() -> bool:
        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        try:
            return await SocketMarks(connection).mark(attempt_id, [recipient], seconds.append)
        finally:
            ticking.cancel()

    try:
        assert asyncio.run(mark_while_ticking()) is True
    finally:
        connection.close()
    assert stage_of(session_factory, attempt_id) == DATA_SENT, "committed"
    assert len(ticks) >= 10, "the event loop went on while PostgreSQL held the mark"
    assert seconds and seconds[0] >= HOLD_SECONDS * 0.9, "timed from send to answer"


def test_marks_at_once_go_one_after_another_on_one_connection(engine, session_factory, session):
    attempts = leased_attempts(session_factory, session, 5)
    seconds: list[float] = []
    assert marked(engine, attempts, seconds=seconds) == [True] * 5
    assert {stage_of(session_factory, a) for a, _ in attempts} == {DATA_SENT}
    assert len(seconds) == 5


def test_a_suppressed_recipient_or_a_swept_attempt_is_refused_and_nothing_marked(
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

    answers = marked(engine, [(suppressed, address), (swept, other), (fine, third)])

    assert answers == [False, False, True]
    stages = [stage_of(session_factory, a) for a in (suppressed, swept, fine)]
    assert stages == [CLAIMED, CLAIMED, DATA_SENT]


def test_the_statement_is_prepared_once_per_database_session(engine, session_factory, session):
    (first, recipient), (second, other) = leased_attempts(session_factory, session, 2)
    connection = records.writer(engine)
    try:
        for attempt_id, address in ((first, recipient), (second, other)):  # two batches
            socket_marks = SocketMarks(connection)
            assert asyncio.run(socket_marks.mark(attempt_id, [address], lambda s: None))
        names = connection.scalars(text("SELECT name FROM pg_prepared_statements")).all()
    finally:
        connection.close()
    assert names.count("console_data_sent_mark") == 1


def test_a_mark_after_the_driver_deallocated_every_statement_prepares_it_again(
    engine, session_factory, session
):
    """psycopg answers a rollback with DEALLOCATE ALL once it has prepared statements of
    its own: the mark's statement is gone although the connection still says prepared."""
    (first, recipient), (second, other) = leased_attempts(session_factory, session, 2)
    connection = records.writer(engine)
    try:
        assert asyncio.run(SocketMarks(connection).mark(first, [recipient], lambda s: None))
        driver = connection.connection.dbapi_connection
        for _ in range(driver.prepare_threshold + 1):  # the driver prepares this one itself
            driver.execute("SELECT %s::int", [1])
        driver.autocommit = False
        driver.execute("SELECT 1")
        driver.rollback()  # ... and deallocates every prepared statement
        driver.autocommit = True
        assert asyncio.run(SocketMarks(connection).mark(second, [other], lambda s: None))
    finally:
        connection.close()
    assert stage_of(session_factory, second) == DATA_SENT


def test_a_connection_lost_mid_mark_raises_and_a_fresh_one_marks(engine, session_factory, session):
    (first, recipient), (second, other) = leased_attempts(session_factory, session, 2)
    connection = records.writer(engine)
    socket_marks = SocketMarks(connection)
    pid = connection.execute(text("SELECT pg_backend_pid()")).scalar()
    with engine.connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    with pytest.raises(DBAPIError):
        asyncio.run(socket_marks.mark(first, [recipient], lambda seconds: None))
    assert connection.invalidated, "not given back to the pool"
    connection.close()
    assert stage_of(session_factory, first) == CLAIMED
    assert marked(engine, [(second, other)]) == [True]


def held_then_cancelled(engine, attempt_id: int, recipient: str, then):
    """Mark `attempt_id` while its row is locked, cancel that mark, then await
    ``then(socket_marks)``; the writer connection and what `then` returned."""
    hold_row_lock(engine, attempt_id)
    connection = records.writer(engine)
    socket_marks = SocketMarks(connection)

    async def cancelled_first():
        waiting = asyncio.create_task(socket_marks.mark(attempt_id, [recipient], lambda s: None))
        await asyncio.sleep(0.05)
        waiting.cancel()
        assert socket_marks.in_flight
        return await then(socket_marks)

    return connection, asyncio.run(cancelled_first())


def test_a_cancelled_mark_is_still_read_and_the_next_one_waits_for_it(
    engine, session_factory, session
):
    (held, recipient), (after, other) = leased_attempts(session_factory, session, 2)

    async def mark_after(socket_marks: SocketMarks) -> bool:
        marked_after = await socket_marks.mark(after, [other], lambda s: None)
        return marked_after and not socket_marks.in_flight

    connection, marked_after = held_then_cancelled(engine, held, recipient, mark_after)
    connection.close()
    assert marked_after is True
    assert stage_of(session_factory, held) == DATA_SENT, "committed though nobody waited"


def test_a_mark_abandoned_in_flight_invalidates_its_connection(engine, session_factory, session):
    ((stuck, recipient),) = leased_attempts(session_factory, session, 1)

    async def abandon(socket_marks: SocketMarks) -> bool:
        socket_marks.abandon()
        return socket_marks.in_flight

    connection, still_in_flight = held_then_cancelled(engine, stuck, recipient, abandon)
    assert connection.invalidated and not still_in_flight, "not given back mid-statement"
    connection.close()
