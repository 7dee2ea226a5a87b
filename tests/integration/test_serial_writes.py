"""The worker's T2 writes: in order, on one connection, errors raised when the batch drains."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from console.store.database import make_engine
from console.store.serial_writes import SerialWrites


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


def test_on_sqlite_the_writes_run_in_the_loops_thread_while_the_sender_waits(tmp_path):
    import threading

    writes = SerialWrites(make_engine(f"sqlite:///{tmp_path / 'w.db'}"))
    threads: list[threading.Thread] = []

    async def batch() -> None:
        writes.post(lambda connection: threads.append(threading.current_thread()))
        assert threads == [], "not before the sender yields"
        await asyncio.sleep(0)  # as while waiting for the relay's reply
        assert threads == [threading.current_thread()]

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
