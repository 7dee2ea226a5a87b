"""The worker's T2 writes: in order, on one connection, errors raised when the batch drains."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from console.models import Intent
from console.store.database import make_engine, make_session_factory
from console.store.threads import INLINE_ROUND_TRIP_SECONDS, SerialWrites, inline_for
from console.transports.memory import MemoryTransport
from console.vocabulary import SUBMITTED
from tests.support.orders import enqueue_orders


def test_posted_writes_run_in_order_and_drain_waits_for_all(tmp_path):
    writes = SerialWrites(make_engine(f"sqlite:///{tmp_path / 'w.db'}"))
    done: list[int] = []

    async def batch() -> None:
        for number in range(100):
            writes.post(lambda connection, n: done.append(n), number)
        await writes.drain()
        assert done == list(range(100))

    asyncio.run(batch())
    writes.shutdown()


def test_a_failed_write_is_raised_by_drain_and_the_writes_after_it_still_run(tmp_path):
    writes = SerialWrites(make_engine(f"sqlite:///{tmp_path / 'w.db'}"))
    done: list[str] = []

    def fails(connection) -> None:
        connection.execute(text("SELECT * FROM no_such_table"))

    async def batch() -> None:
        writes.post(fails)
        writes.post(lambda connection: done.append("after"))
        with pytest.raises(Exception, match="no_such_table"):
            await writes.drain()
        await writes.drain()  # raised once, not again

    asyncio.run(batch())
    assert done == ["after"]
    writes.shutdown()


def test_in_the_loops_thread_the_writes_run_while_the_sender_waits(engine):
    """Always on SQLite; on PostgreSQL when the worker finds the database near."""
    import threading

    writes = SerialWrites(engine)
    writes.run_inline(True)
    threads: list[threading.Thread] = []

    async def batch() -> None:
        writes.post(lambda connection: threads.append(threading.current_thread()))
        assert threads == [], "not before the sender yields"
        await asyncio.sleep(0)  # as while waiting for the relay's reply
        assert threads == [threading.current_thread()]
        writes.post(lambda connection: connection.execute(text("SELECT no_such_column")))
        with pytest.raises(Exception, match="no_such_column"):
            await writes.drain()

    asyncio.run(batch())
    writes.shutdown()


@pytest.mark.postgres
def test_on_postgresql_the_writes_run_in_a_thread_of_their_own(postgres_url):
    import threading

    writes = SerialWrites(make_engine(postgres_url))
    threads: list[threading.Thread] = []

    async def batch() -> None:
        writes.post(lambda connection: threads.append(threading.current_thread()))
        await writes.drain()

    asyncio.run(batch())
    assert threads and threads[0] is not threading.current_thread()
    writes.shutdown()


def test_on_sqlite_the_writes_stay_in_the_loops_thread_and_switch_only_when_drained(tmp_path):
    writes = SerialWrites(make_engine(f"sqlite:///{tmp_path / 'w.db'}"))
    writes.run_inline(False)
    assert writes.inline

    async def batch() -> None:
        writes.post(lambda connection: None)
        with pytest.raises(RuntimeError, match="drain"):
            writes.run_inline(True)
        await writes.drain()
        writes.run_inline(True)

    asyncio.run(batch())
    writes.shutdown()


def test_the_writes_run_inline_only_while_the_database_is_known_to_answer_quickly():
    assert not inline_for(None)  # before the first mark: the thread, safe for any distance
    assert inline_for(0.0002)
    assert inline_for(INLINE_ROUND_TRIP_SECONDS)
    assert not inline_for(INLINE_ROUND_TRIP_SECONDS * 1.01)
    assert not inline_for(0.004)  # a database across a network


@pytest.mark.postgres
@pytest.mark.parametrize(("mark_seconds", "inline"), [(None, False), (0.0002, True), (0.01, False)])
def test_a_worker_on_postgresql_chooses_where_its_records_run_from_its_marks(
    postgres_url, make_worker, mark_seconds, inline
):
    session_factory = make_session_factory(make_engine(postgres_url))
    [intent_id] = enqueue_orders(session_factory, ["ada@example.com"])
    worker = make_worker(MemoryTransport(), session_factory=session_factory)
    worker._stages._mark_seconds = mark_seconds  # as measured over the batches before
    worker.run_once()
    assert worker._writes.inline is inline
    assert worker._stages.mark_seconds is not None  # this batch's mark was timed
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUBMITTED


@pytest.mark.postgres
def test_to_a_far_database_writes_overlap_on_several_threads_and_drain_waits_for_all(
    postgres_url,
):
    """Each record is its own compare-and-set: across a network they need not queue."""
    import threading
    import time

    writes = SerialWrites(make_engine(postgres_url), threads=3)
    running, most_at_once, done = [0], [0], []
    lock = threading.Lock()

    def slow_write(connection, number: int) -> None:
        with lock:
            running[0] += 1
            most_at_once[0] = max(most_at_once[0], running[0])
        connection.execute(text("SELECT pg_sleep(0.1)"))
        with lock:
            running[0] -= 1
            done.append(number)

    async def batch() -> float:
        started = time.perf_counter()
        for number in range(6):
            writes.post(slow_write, number)
        await writes.drain()
        return time.perf_counter() - started

    elapsed = asyncio.run(batch())
    assert sorted(done) == list(range(6)), "drain waited for every write"
    assert most_at_once[0] == 3
    assert elapsed < 0.5, "six writes of 0.1 s on three threads: two rounds"
    writes.shutdown()
