"""A worker whose database goes away: one line when it goes, one when it is back, then it sends.

The worker reaches PostgreSQL through a switch (a TCP forwarder) that the test
cuts, dropping every connection and refusing new ones, and then restores.
Both loops are driven: ``console worker``'s and the one ``console serve`` embeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

import pytest
from sqlalchemy import func, select

from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.store.database import make_engine, make_session_factory
from console.transports.memory import MemoryTransport
from console.vocabulary import SUBMITTED
from console.worker.running import EmbeddedWorker, run_loop
from tests.support.delay_proxy import url_through
from tests.support.loop_server import LoopServer

POLL_SECONDS = 0.05
GONE = "the database cannot be reached"
BACK = "the database answers again"


class Switch(LoopServer):
    """Forwards 127.0.0.1:port to `target_port` until ``cut``, and again after ``restore``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.closed = False
        self._writers: set[asyncio.StreamWriter] = set()
        super().__init__()

    async def _session(self, reader, writer) -> None:
        if self.closed:
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(
            "127.0.0.1", self.target_port
        )
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(self._pump(reader, upstream_writer),
                             self._pump(upstream_reader, writer))  # fmt: skip

    async def _pump(self, reader, writer) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    def cut(self) -> None:
        self.closed = True
        self._loop.call_soon_threadsafe(lambda: [w.close() for w in list(self._writers)])

    def restore(self) -> None:
        self.closed = False

    def stop(self) -> None:
        self.cut()
        time.sleep(0.2)  # the sessions see their streams close
        super().stop()


def enqueue_one(session_factory, key: str) -> None:
    with session_factory() as session:
        enqueue(session, key=key, to=f"{key}@example.com", template="login-code",
                params={"code": "123456"})  # fmt: skip
        session.commit()


def wait_until(condition, timeout_seconds: float = 20) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def submitted(session_factory) -> int:
    with session_factory() as session:
        query = select(func.count()).select_from(Intent).where(Intent.status == SUBMITTED)
        return session.execute(query).scalar_one()


def attempts_of(session_factory, key: str) -> list[str]:
    """The outcomes of the attempts of the intent of `key`, oldest first."""
    with session_factory() as session:
        query = (
            select(Attempt.outcome)
            .join(Intent, Intent.id == Attempt.intent_id)
            .where(Intent.idempotency_key == key)
            .order_by(Attempt.id)
        )
        return list(session.scalars(query))


@contextlib.contextmanager
def standalone_loop(worker):
    wake = threading.Event()
    thread = threading.Thread(
        target=run_loop, args=(worker,), kwargs=dict(poll_seconds=POLL_SECONDS, wake=wake)
    )
    thread.start()
    try:
        yield
    finally:
        worker.request_stop()
        wake.set()
        thread.join(20)


@contextlib.contextmanager
def embedded_loop(worker):
    embedded = EmbeddedWorker(worker, POLL_SECONDS).start()
    try:
        yield
    finally:
        embedded.shutdown()


@pytest.mark.parametrize("loop", [standalone_loop, embedded_loop], ids=["worker", "serve"])
def test_a_lost_database_is_one_line_going_and_one_coming_back(
    loop, postgres_url, pg_cluster, make_worker, caplog
):
    caplog.set_level(logging.INFO)
    switch = Switch(pg_cluster.port)
    engine = make_engine(url_through(postgres_url, switch.port))
    direct_engine = make_engine(postgres_url)
    direct = make_session_factory(direct_engine)
    worker = make_worker(MemoryTransport(), session_factory=make_session_factory(engine),
                         clock=utcnow)  # fmt: skip
    try:
        with loop(worker):
            enqueue_one(direct, "before")
            wait_until(lambda: submitted(direct) == 1)
            switch.cut()
            time.sleep(40 * POLL_SECONDS)  # dozens of ticks fail meanwhile
            enqueue_one(direct, "during")
            time.sleep(10 * POLL_SECONDS)
            assert submitted(direct) == 1, "nothing sent while the database is away"
            switch.restore()
            wait_until(lambda: submitted(direct) == 2)
        assert attempts_of(direct, "during") == ["accepted"], "sent on its first attempt once back"
    finally:
        engine.dispose()
        direct_engine.dispose()
        switch.stop()

    worker_lines = [r for r in caplog.records if r.name.startswith("console.worker")]
    messages = [r.getMessage() for r in worker_lines if r.levelno >= logging.INFO]
    assert sum(GONE in m for m in messages) == 1, messages
    assert sum(BACK in m for m in messages) == 1, messages
    assert messages.index(next(m for m in messages if GONE in m)) < messages.index(
        next(m for m in messages if BACK in m)
    )
    assert not [r for r in worker_lines if r.exc_info], "no traceback"
    assert "tick failed" not in caplog.text and "run failed" not in caplog.text


@pytest.mark.parametrize("loop", [standalone_loop, embedded_loop], ids=["worker", "serve"])
def test_other_failures_are_logged_each_time_with_their_traceback(
    loop, sqlite_url, make_worker, caplog, monkeypatch
):
    caplog.set_level(logging.INFO)
    engine = make_engine(sqlite_url)
    worker = make_worker(MemoryTransport(), session_factory=make_session_factory(engine),
                         clock=utcnow)  # fmt: skip

    def broken(now=None):
        raise ValueError("not a database problem")

    monkeypatch.setattr(worker, "run_once", broken)
    with loop(worker):
        wait_until(lambda: len([r for r in caplog.records if r.exc_info]) >= 3)
    engine.dispose()
    failures = [r for r in caplog.records if r.exc_info]
    assert all(r.exc_info[0] is ValueError for r in failures)
    assert GONE not in caplog.text
