"""The claim ahead (PostgreSQL across a network): the next batch's T1 runs in a thread
while the last emails of a full batch are still being sent; the next tick takes that
batch instead of claiming.

What must not change: every intent sent once, a stop or a close gives the batch back
(no attempt counted), a lane the breaker closed meanwhile sends nothing of it, a
critical intent waits for no more than the batch in flight; next door and on SQLite
nothing is claimed ahead. The database is reached through a proxy that delays each
direction (``pg_far_port``).
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from sqlalchemy import func, select

from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.store.database import make_engine, make_session_factory
from console.store.send_guards import read_breakers
from console.transports.memory import MemoryTransport
from console.vocabulary import CANCELLED, EXPIRED, OPEN, PENDING, SENDING, SUBMITTED
from console.worker.eligibility import EligibilityPolicy
from console.worker.guard import GuardPolicy, SendGuard
from tests.support.delay_proxy import SubprocessDelayProxy, url_through
from tests.support.orders import ORDER, enqueue_login_code, enqueue_orders

pytestmark = pytest.mark.postgres

BATCH = 5


@pytest.fixture
def pg_factory(postgres_url, pg_far_port):
    engine = make_engine(url_through(postgres_url, pg_far_port))
    yield make_session_factory(engine)
    engine.dispose()


def statuses(session_factory) -> dict[str, int]:
    with session_factory() as session:
        rows = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        return dict(rows.all())


def wait_for_sending(session_factory, count: int, timeout_seconds: float = 5.0) -> None:
    """The claim ahead commits in its own thread after the tick returns: wait for it."""
    deadline = time.monotonic() + timeout_seconds
    while statuses(session_factory).get(SENDING, 0) != count:
        assert time.monotonic() < deadline, f"{count} intents never held ahead"
        time.sleep(0.02)


def wait_for_attempts(session_factory, count: int, timeout_seconds: float = 5.0) -> None:
    """Wait until `count` attempts exist: this batch's and those claimed ahead (the
    records of this batch's sends may not be written yet)."""
    deadline = time.monotonic() + timeout_seconds
    while attempts_count(session_factory) < count:
        assert time.monotonic() < deadline, f"never {count} attempts"
        time.sleep(0.01)


def attempts_count(session_factory) -> int:
    with session_factory() as session:
        return session.scalar(select(func.count()).select_from(Attempt))


def addresses(count: int) -> list[str]:
    return [f"c{n}@example.com" for n in range(count)]


def test_a_full_batch_claims_the_next_one_ahead_and_every_intent_goes_once(pg_factory, make_worker):
    enqueue_orders(pg_factory, addresses(23))
    transport = MemoryTransport()
    worker = make_worker(
        transport, session_factory=pg_factory, batch_size=BATCH, concurrency=2, claim_ahead=True
    )

    assert worker.run_once().claimed == BATCH
    wait_for_sending(pg_factory, BATCH)  # the second batch, leased before its tick
    assert statuses(pg_factory) == {SUBMITTED: BATCH, SENDING: BATCH, PENDING: 23 - 2 * BATCH}

    claimed = [BATCH]
    while report := worker.run_once():
        if not report.claimed:
            break
        claimed.append(report.claimed)
    assert claimed == [5, 5, 5, 5, 3]
    assert statuses(pg_factory) == {SUBMITTED: 23}
    sent = sorted(email.recipient for email in transport.sent)
    assert sent == sorted(addresses(23)), "each intent sent once"
    assert attempts_count(pg_factory) == 23, "one attempt each"


def test_a_batch_that_was_not_full_claims_nothing_ahead(pg_factory, make_worker):
    enqueue_orders(pg_factory, addresses(BATCH - 1))
    worker = make_worker(
        MemoryTransport(), session_factory=pg_factory, batch_size=BATCH, claim_ahead=True
    )
    assert worker.run_once().claimed == BATCH - 1
    enqueue_orders(pg_factory, addresses(3), prefix="later")
    time.sleep(0.2)
    assert statuses(pg_factory) == {SUBMITTED: BATCH - 1, PENDING: 3}


class StopDuringLastSend(MemoryTransport):
    """Asks the worker to stop while it sends the batch's last email."""

    def __init__(self, last_of_batch: int) -> None:
        super().__init__()
        self.worker = None
        self.last_of_batch = last_of_batch

    async def send(self, email, on_stage):
        if len(self.sent) + 1 == self.last_of_batch:
            self.worker.request_stop()
        return await super().send(email, on_stage)


def test_a_stop_gives_the_batch_claimed_ahead_back_uncounted(pg_factory, make_worker):
    enqueue_orders(pg_factory, addresses(12))
    transport = StopDuringLastSend(last_of_batch=BATCH)
    worker = make_worker(transport, session_factory=pg_factory, batch_size=BATCH, claim_ahead=True)
    transport.worker = worker

    report = worker.run_once()

    assert report.claimed == BATCH and report.released == BATCH
    assert statuses(pg_factory) == {SUBMITTED: BATCH, PENDING: 12 - BATCH}
    assert attempts_count(pg_factory) == BATCH, "the batch claimed ahead left no attempt"
    with pg_factory() as session:
        counts = session.scalars(select(Intent.attempt_count).where(Intent.status == PENDING))
        assert set(counts) == {0}


def test_close_gives_a_batch_claimed_ahead_back(pg_factory, make_worker):
    enqueue_orders(pg_factory, addresses(8))
    worker = make_worker(
        MemoryTransport(), session_factory=pg_factory, batch_size=BATCH, claim_ahead=True
    )
    worker.run_once()
    wait_for_sending(pg_factory, 8 - BATCH)
    worker.close()
    assert statuses(pg_factory) == {SUBMITTED: BATCH, PENDING: 8 - BATCH}
    assert attempts_count(pg_factory) == BATCH


def test_a_lane_the_breaker_opened_meanwhile_sends_nothing_claimed_ahead(
    pg_factory, make_worker, clock
):
    enqueue_orders(pg_factory, addresses(12))
    transport = MemoryTransport()
    worker = make_worker(
        transport,
        session_factory=pg_factory,
        batch_size=BATCH,
        claim_ahead=True,
        guard_policy=GuardPolicy(),
    )
    worker.run_once()
    wait_for_sending(pg_factory, BATCH)
    with pg_factory() as session:  # another worker's relay refused the session
        SendGuard(GuardPolicy(), "another-worker").trip(session, "bulk", clock(), 421)
        assert read_breakers(session)["bulk"].state == OPEN

    report = worker.run_once()

    assert report.claimed == 0 and report.released == BATCH
    assert len(transport.sent) == BATCH, "nothing of the paused lane went out"
    assert statuses(pg_factory) == {SUBMITTED: BATCH, PENDING: 12 - BATCH}
    assert attempts_count(pg_factory) == BATCH


def test_next_door_nothing_is_claimed_ahead_once_the_marks_are_timed(postgres_url, make_worker):
    engine = make_engine(postgres_url)
    factory = make_session_factory(engine)
    enqueue_orders(factory, addresses(12 * BATCH))
    worker = make_worker(
        MemoryTransport(), session_factory=factory, batch_size=BATCH, claim_ahead=True
    )
    ticks = 0
    while worker.database_far:  # no mark timed yet: the database may be far
        assert ticks < 10, "a database next door is found near"
        worker.run_once()
        ticks += 1
    time.sleep(0.2)
    assert statuses(factory) == {SUBMITTED: ticks * BATCH, PENDING: (12 - ticks) * BATCH}
    engine.dispose()


def test_on_sqlite_nothing_is_claimed_ahead(sqlite_url, make_worker):
    engine = make_engine(sqlite_url)
    factory = make_session_factory(engine)
    enqueue_orders(factory, addresses(8))
    worker = make_worker(MemoryTransport(), session_factory=factory, batch_size=BATCH)
    worker_ahead = make_worker(
        MemoryTransport(), session_factory=factory, batch_size=BATCH, claim_ahead=True
    )
    assert not worker_ahead.claims_ahead and not worker.claims_ahead
    worker_ahead.run_once()
    time.sleep(0.2)
    assert statuses(factory) == {SUBMITTED: BATCH, PENDING: 8 - BATCH}
    engine.dispose()


class LoginCodeAfterClaimAhead(MemoryTransport):
    """While the batch's last email is sent, waits for the claim ahead to hold the next
    batch, then commits a login code: due after the claim ahead, before its tick."""

    def __init__(self, session_factory, last_of_batch: int, held_ahead: int) -> None:
        super().__init__()
        self.session_factory = session_factory
        self.last_of_batch, self.held_ahead = last_of_batch, held_ahead
        self.critical_id: int | None = None

    async def send(self, email, on_stage):
        if len(self.sent) + 1 == self.last_of_batch:
            wait_for_attempts(self.session_factory, self.last_of_batch + self.held_ahead)
            self.critical_id = enqueue_login_code(self.session_factory)
        return await super().send(email, on_stage)


def test_a_critical_intent_due_after_the_claim_ahead_goes_first_in_its_tick(
    pg_factory, make_worker
):
    enqueue_orders(pg_factory, addresses(12))
    transport = LoginCodeAfterClaimAhead(pg_factory, last_of_batch=BATCH, held_ahead=BATCH)
    worker = make_worker(
        transport,
        session_factory=pg_factory,
        batch_size=BATCH,
        claim_ahead=True,
        max_attempts=8,
        mail_from="shop@example.com",
    )
    assert worker.run_once().claimed == BATCH
    assert transport.critical_id is not None

    report = worker.run_once()

    assert report.claimed == BATCH + 1, "the batch claimed ahead, and the login code"
    assert transport.sent[BATCH].intent_id == transport.critical_id, "first of its tick"
    assert statuses(pg_factory)[SUBMITTED] == 2 * BATCH + 1  # the rest maybe claimed ahead


def test_close_with_the_database_gone_leaves_the_batch_claimed_ahead_to_the_sweep(
    postgres_url, pg_cluster, make_worker, caplog
):
    proxy = SubprocessDelayProxy(pg_cluster.port, 0.0005)  # this test's own, to cut
    engine = make_engine(url_through(postgres_url, proxy.port))
    direct_engine = make_engine(postgres_url)
    direct = make_session_factory(direct_engine)
    enqueue_orders(direct, addresses(8))
    worker = make_worker(
        MemoryTransport(),
        session_factory=make_session_factory(engine),
        batch_size=BATCH,
        claim_ahead=True,
    )
    worker.run_once()
    wait_for_sending(direct, 8 - BATCH)
    proxy.stop()  # the database is out of reach

    worker.close()  # logs, does not raise

    assert "could not give back the batch claimed ahead" in caplog.text
    assert statuses(direct) == {SUBMITTED: BATCH, SENDING: 8 - BATCH}, "leases left to expire"
    engine.dispose()
    direct_engine.dispose()


def test_mail_that_expired_while_claimed_ahead_is_screened_at_its_own_tick_and_not_sent(
    pg_factory, make_worker, clock
):
    """Expiry is read when the batch's own tick begins, not when it was claimed ahead."""
    with pg_factory() as session:
        expires_at = utcnow() + dt.timedelta(seconds=30)
        for number in range(2 * BATCH):
            enqueue(session, key=f"offer:{number}", to=f"o{number}@example.com",
                    expires_at=expires_at, **ORDER)  # fmt: skip
        session.commit()
    transport = MemoryTransport()
    worker = make_worker(
        transport, session_factory=pg_factory, batch_size=BATCH, concurrency=2, claim_ahead=True
    )
    assert worker.run_once().claimed == BATCH
    wait_for_sending(pg_factory, BATCH)  # the second batch, leased while it was still wanted

    clock.advance(60)  # past expires_at before its tick
    while worker.run_once().claimed or statuses(pg_factory).get(PENDING):
        pass

    assert len(transport.sent) == BATCH, "nothing sent after it expired"
    assert statuses(pg_factory) == {SUBMITTED: BATCH, EXPIRED: BATCH}


def test_mail_made_ineligible_while_claimed_ahead_is_screened_at_its_own_tick_and_not_sent(
    pg_factory, make_worker
):
    """The application's eligibility check runs again when the batch's own tick begins."""
    with pg_factory() as session:
        for number in range(2 * BATCH):
            enqueue(session, key=f"case:{number}", to=f"v{number}@example.com",
                    purpose="case-notice", **ORDER)  # fmt: skip
        session.commit()
    revoked: set[str] = set()
    checks = {
        "case-notice": lambda intent, _: "access revoked" if intent.recipient in revoked else None
    }
    transport = MemoryTransport()
    worker = make_worker(
        transport,
        session_factory=pg_factory,
        batch_size=BATCH,
        concurrency=2,
        claim_ahead=True,
        eligibility=EligibilityPolicy(checks),
    )
    assert worker.run_once().claimed == BATCH
    wait_for_sending(pg_factory, BATCH)  # the second batch, leased while still eligible

    revoked.update(f"v{number}@example.com" for number in range(2 * BATCH))
    while worker.run_once().claimed or statuses(pg_factory).get(PENDING):
        pass

    assert len(transport.sent) == BATCH, "nothing sent after its recipient was revoked"
    assert statuses(pg_factory) == {SUBMITTED: BATCH, CANCELLED: BATCH}
