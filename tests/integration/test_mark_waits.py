"""A data_sent mark that waits on the database holds back only its own body, never the
other connections' sends."""

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
def test_a_mark_waiting_on_the_database_holds_back_only_its_own_body(postgres_url, make_worker):
    engine = make_engine(postgres_url)
    factory = make_session_factory(engine)
    enqueue_orders(factory, ["a@example.com", "b@example.com"])
    transport = MarkHeldBack(engine, held="a@example.com")
    worker = make_worker(transport, session_factory=factory, concurrency=2)

    worker.run_once()

    assert transport.sent[0].recipient == "b@example.com", "b went while a's mark waited"
    with factory() as session:
        assert set(session.scalars(select(Intent.status))) == {SUBMITTED}
    for locker in transport.lockers:
        locker.join(10)
    engine.dispose()
