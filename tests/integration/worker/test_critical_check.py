"""Critical intents due since a large batch was claimed go before the rest of it
(``worker.claim``, ``CriticalCheck``), on SQLite and PostgreSQL: every ``CHECK_EVERY`` emails
taken, one look, and a login code found is claimed and sent next; nothing is sent
twice, and a look that finds nothing claims nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from console.models import Attempt, Intent
from console.transports.memory import MemoryTransport
from console.vocabulary import SUBMITTED
from console.worker import claim
from tests.support.orders import enqueue_login_code, enqueue_orders

CHECK_EVERY = 4
BATCH = 12


@pytest.fixture(autouse=True)
def check_every_four(monkeypatch):
    monkeypatch.setattr(claim, "CHECK_EVERY", CHECK_EVERY)


class LoginCodeDuringTheBatch(MemoryTransport):
    """Commits a login code as the batch's `during`-th email is sent."""

    def __init__(self, session_factory, during: int) -> None:
        super().__init__()
        self.session_factory, self.during = session_factory, during
        self.critical_id: int | None = None

    async def send(self, email, on_stage):
        if len(self.sent) + 1 == self.during:
            self.critical_id = enqueue_login_code(self.session_factory)
        return await super().send(email, on_stage)


def worker_for(make_worker, transport):
    return make_worker(transport, batch_size=BATCH, max_attempts=8, mail_from="shop@example.com")


def test_a_login_code_enqueued_during_a_batch_goes_at_the_next_look(session_factory, make_worker):
    enqueue_orders(session_factory, [f"c{n}@example.com" for n in range(BATCH)])
    transport = LoginCodeDuringTheBatch(session_factory, during=2)

    report = worker_for(make_worker, transport).run_once()

    assert report.claimed == BATCH + 1, "the batch, and the login code found mid-batch"
    sent_ids = [email.intent_id for email in transport.sent]
    assert sent_ids.index(transport.critical_id) == CHECK_EVERY, "right after the 4th"
    assert len(sent_ids) == len(set(sent_ids)) == BATCH + 1
    with session_factory() as session:
        statuses = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        assert dict(statuses.all()) == {SUBMITTED: BATCH + 1}
        assert session.scalar(select(func.count()).select_from(Attempt)) == BATCH + 1


def test_a_batch_with_nothing_critical_meanwhile_sends_as_claimed(session_factory, make_worker):
    enqueue_orders(session_factory, [f"c{n}@example.com" for n in range(BATCH)])
    transport = MemoryTransport()
    report = worker_for(make_worker, transport).run_once()
    assert report.claimed == BATCH and len(transport.sent) == BATCH


def test_the_last_email_of_a_batch_looks_for_nothing(session_factory, make_worker):
    """The next tick's claim takes the critical lane first anyway."""
    enqueue_orders(session_factory, [f"c{n}@example.com" for n in range(CHECK_EVERY)])
    transport = LoginCodeDuringTheBatch(session_factory, during=2)
    worker = worker_for(make_worker, transport)
    assert worker.run_once().claimed == CHECK_EVERY
    assert worker.run_once().claimed == 1  # the login code, in the next tick
    assert transport.sent[-1].intent_id == transport.critical_id


def test_a_look_that_fails_is_logged_and_the_batch_goes_on(
    session_factory, make_worker, monkeypatch, caplog
):
    from console.engine.postgres_claim import PostgresClaimSteps
    from console.engine.sqlite_claim import SqliteClaimSteps

    async def database_gone(steps, now):
        raise OperationalError("SELECT", {}, ConnectionError("the database went away"))

    for steps in (SqliteClaimSteps, PostgresClaimSteps):
        monkeypatch.setattr(steps, "critical_due", database_gone)
    enqueue_orders(session_factory, [f"c{n}@example.com" for n in range(BATCH)])
    transport = LoginCodeDuringTheBatch(session_factory, during=2)
    worker = worker_for(make_worker, transport)

    assert worker.run_once().claimed == BATCH, "every look failed: the batch as claimed"
    assert len(transport.sent) == BATCH
    assert "could not look for critical intents" in caplog.text
    monkeypatch.undo()
    assert worker.run_once().claimed == 1  # the login code: the next claim takes it
