"""The data_sent mark to a database across a network: in a thread, so a slow mark holds
back only its own body, never the other connections' sends."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text

from console.models import Intent
from console.store.database import make_engine, make_session_factory
from console.transports.memory import MemoryTransport
from console.vocabulary import DATA_SENT, SUBMITTED
from tests.support.orders import enqueue_orders

HOLD_SECONDS = 0.5


class MarkHeldBack(MemoryTransport):
    """Before the mark of `held`'s body, another transaction locks its attempt row for
    HOLD_SECONDS: that mark waits for the lock."""

    def __init__(self, engine, held: str) -> None:
        super().__init__()
        self.engine, self.held = engine, held
        self.lockers: list[threading.Thread] = []

    async def send(self, email, on_stage):
        async def held_back(staged_email, stage):
            if stage == DATA_SENT and staged_email.recipient == self.held:
                self._lock_attempt(staged_email.attempt_id)
            await on_stage(staged_email, stage)

        return await super().send(email, held_back)

    def _lock_attempt(self, attempt_id: int) -> None:
        locked = threading.Event()

        def hold() -> None:
            with self.engine.connect() as connection:
                connection.execute(
                    text("SELECT id FROM email_attempt WHERE id = :id FOR UPDATE"),
                    {"id": attempt_id},
                )
                locked.set()
                threading.Event().wait(HOLD_SECONDS)
                connection.commit()

        locker = threading.Thread(target=hold)
        locker.start()
        self.lockers.append(locker)
        locked.wait(10)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("mark_seconds", "first_sent"),
    [(0.01, "b@example.com"), (0.0002, "a@example.com")],
    ids=["database far: marks in threads", "database near: marks in the loop"],
)
def test_a_mark_waiting_on_the_database_holds_back_only_its_own_body(
    postgres_url, make_worker, mark_seconds, first_sent
):
    engine = make_engine(postgres_url)
    factory = make_session_factory(engine)
    enqueue_orders(factory, ["a@example.com", "b@example.com"])
    transport = MarkHeldBack(engine, held="a@example.com")
    worker = make_worker(transport, session_factory=factory, concurrency=2)
    worker._stages._mark_seconds = mark_seconds  # as measured over the batches before

    worker.run_once()

    assert worker._stages.inline is (mark_seconds < 0.001)
    assert transport.sent[0].recipient == first_sent
    with factory() as session:
        assert set(session.scalars(select(Intent.status))) == {SUBMITTED}
    for locker in transport.lockers:
        locker.join(10)
    engine.dispose()


def test_on_sqlite_the_marks_always_run_in_the_loop(make_worker, sqlite_url):
    engine = make_engine(sqlite_url)
    factory = make_session_factory(engine)
    enqueue_orders(factory, ["a@example.com", "b@example.com"])
    worker = make_worker(MemoryTransport(), session_factory=factory, concurrency=2)
    worker._stages._mark_seconds = 0.01
    worker.run_once()
    assert worker._stages.inline
    engine.dispose()
