"""The daily quota across processes: three `console worker` processes on PostgreSQL with
``CONSOLE_SEND_DAILY_QUOTA=50`` and a critical reserve of 5 send 45 bulk messages to a
real SMTP server and stop; login codes may still take the 5 left, and nothing more
leaves. Counted on the server's receipts, then checked in the database: what is left
stays queued, nothing is left leased."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Attempt, Intent
from console.outbox import enqueue
from console.state_tables import WorkerHeartbeat
from console.store.database import make_engine, make_session_factory
from console.vocabulary import BULK, CRITICAL, PENDING, SENDING, SUBMITTED
from tests.support.backlog import queue_orders
from tests.support.console_processes import console_environment, wait_for_workers, worker_process
from tests.support.smtp_server import SubprocessSMTPServer, read_records

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

QUOTA = 50
RESERVE = 5
ORDERS = 80
LOGIN_CODES = 8
WORKERS = 3
SETTLE_SECONDS = 1.5  # several poll intervals with nothing more received
START_TIMEOUT_SECONDS = 20
PHASE_TIMEOUT_SECONDS = 15


def wait_until_settled(record_path, expected: int, workers) -> int:
    """Wait until the server holds `expected` receipts and nothing more arrives for
    SETTLE_SECONDS (or the phase times out); return how many it holds."""
    deadline = time.monotonic() + PHASE_TIMEOUT_SECONDS
    count, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        assert all(w.process.poll() is None for w in workers), "a worker died"
        now_count = len(read_records(record_path))
        if now_count != count:
            count, since = now_count, time.monotonic()
        elif count >= expected and time.monotonic() - since >= SETTLE_SECONDS:
            break
        time.sleep(0.1)
    return count


def queue_login_codes(session_factory, count: int) -> None:
    with session_factory() as session:
        for n in range(count):
            enqueue(
                session,
                key=f"login:{n}",
                to=f"member{n}@example.com",
                template="login-code",
                params={"code": f"{n:06d}"},
            )
        session.commit()


def statuses(engine) -> dict[tuple[str, str], int]:
    with Session(engine) as session:
        query = select(Intent.lane, Intent.status, func.count())
        query = query.group_by(Intent.lane, Intent.status)
        return {(lane, status): n for lane, status, n in session.execute(query)}


@pytest.mark.parametrize("rate", [None, "100"], ids=["quota-alone", "quota-and-rate"])
def test_three_workers_stop_at_the_daily_quota_and_keep_its_reserve_for_login_codes(
    postgres_url, tmp_path, rate
):
    engine = make_engine(postgres_url)
    session_factory = make_session_factory(engine)
    record_path = tmp_path / "received.jsonl"
    server = SubprocessSMTPServer.start(record_path=record_path)
    settings = dict(
        CONSOLE_SEND_DAILY_QUOTA=str(QUOTA),
        CONSOLE_SEND_DAILY_CRITICAL_RESERVE=str(RESERVE),
        CONSOLE_POLL_SECONDS="0.2",
        CONSOLE_BATCH_SIZE="10",
        CONSOLE_SMTP_CONNECTIONS="2",
    )
    if rate is not None:
        settings.update(CONSOLE_SEND_RATE=rate)
    env = console_environment(postgres_url, server.url, **settings)
    workers = [worker_process(env, tmp_path) for _ in range(WORKERS)]
    try:
        for worker in workers:
            worker.start()
        wait_for_workers(engine, WORKERS, time.monotonic() + START_TIMEOUT_SECONDS, workers)
        queue_orders(session_factory, ORDERS)
        bulk_received = wait_until_settled(record_path, QUOTA - RESERVE, workers)
        queue_login_codes(session_factory, LOGIN_CODES)
        all_received = wait_until_settled(record_path, QUOTA, workers)
        time.sleep(SETTLE_SECONDS)  # the workers keep ticking, and claim nothing more
        with Session(engine) as session:
            last_ticks = session.execute(select(func.min(WorkerHeartbeat.last_tick_at)))
            ticked_ago = time.time() - last_ticks.scalar_one().timestamp()
        alive = [w.process.poll() is None for w in workers]
    finally:
        exit_codes = [worker.stop(10) for worker in workers]
        server.stop()
    try:
        records = read_records(record_path)
        by_status = statuses(engine)
        with Session(engine) as session:
            attempts = session.execute(select(func.count()).select_from(Attempt)).scalar_one()
    finally:
        engine.dispose()
    print(
        f"bulk stopped at {bulk_received} receipts, all stopped at {all_received}; "
        f"{len(records)} received in all, statuses {by_status}"
    )
    assert alive == [True] * WORKERS and exit_codes == [0] * WORKERS
    assert ticked_ago < SETTLE_SECONDS, "a worker stopped ticking: not why claiming stopped"
    assert bulk_received == QUOTA - RESERVE
    assert all_received == QUOTA
    assert len(records) == QUOTA and {r.result for r in records} == {"250"}
    assert len({r.message_id for r in records}) == QUOTA, "a message was received twice"
    logins = [r for r in records if r.recipient.startswith("member")]
    assert len(logins) == RESERVE
    assert by_status == {
        (BULK, SUBMITTED): QUOTA - RESERVE,
        (BULK, PENDING): ORDERS - (QUOTA - RESERVE),
        (CRITICAL, SUBMITTED): RESERVE,
        (CRITICAL, PENDING): LOGIN_CODES - RESERVE,
    }
    assert (BULK, SENDING) not in by_status and attempts == QUOTA, "something left leased"
