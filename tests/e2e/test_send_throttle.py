"""Throttling across processes, measured on a real SMTP server's receipts: three
`console worker` processes on PostgreSQL at ``CONSOLE_SEND_RATE=20``; the server answers
``454 4.7.0 Throttling failure: Maximum sending rate exceeded`` to three messages in a
row (the 60th to 62nd to arrive, as a provider over its limit does). From then on the
server accepts about half the rate; the throttled intents are retried and accepted, and
the lane's circuit breaker, tuned to open on a single counted failure, stays closed.

The penalty lasts ``HOLD_SECONDS`` (a minute) and the rate then climbs back a tenth every
``STEP_SECONDS``: too long for this test, so after measuring the halved rate it moves the
shared bucket's ``slowed_at`` back (as if the time had passed), first to the third step
of the recovery (0.8 of the rate), then past the last, and measures each on the receipts.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from console.core import token_bucket as tb
from console.models import Attempt, Intent
from console.state_tables import LaneBreaker, SendBudget
from console.store.database import make_engine, make_session_factory
from console.vocabulary import SUBMITTED, TRANSIENT
from tests.support.backlog import queue_orders
from tests.support.console_processes import (
    console_environment,
    submitted,
    wait_for_workers,
    worker_process,
)
from tests.support.smtp_server import SubprocessSMTPServer, read_records

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

RATE = 20
ORDERS = 260
WORKERS = 3
THROTTLING = "454 4.7.0 Throttling failure: Maximum sending rate exceeded"
THROTTLED_ARRIVALS = (60, 61, 62)
HALVED_SECONDS = 5.0  # measured from 1 s after the first 454 (claims in flight then)
STEP_SECONDS = 3.0  # at the third step of the recovery
FULL_SECONDS = 3.0  # recovered
SETTLE = 0.5  # after moving the clock: claims made before are sent by then
TOLERANCE = 0.2  # of the rate expected
START_TIMEOUT_SECONDS = 20
RUN_TIMEOUT_SECONDS = 40


def move_slowed_at_back(engine, seconds: float) -> tuple[float, float]:
    """Move the last halving `seconds` into the past; return (factor, slowed_at) before."""
    with engine.begin() as connection:
        row = connection.execute(select(SendBudget.factor, SendBudget.slowed_at)).one()
        connection.execute(
            text("UPDATE send_budget SET slowed_at = slowed_at - :seconds"), {"seconds": seconds}
        )
    return row.factor, row.slowed_at


def accepted_rate(times: list[float], start: float, end: float) -> float:
    return sum(start <= t < end for t in times) / (end - start)


def test_a_throttling_reply_halves_the_shared_rate_measured_on_the_receipts(postgres_url, tmp_path):
    engine = make_engine(postgres_url)
    session_factory = make_session_factory(engine)
    record_path = tmp_path / "received.jsonl"
    script = {f"#{n}": [THROTTLING] for n in THROTTLED_ARRIVALS}
    server = SubprocessSMTPServer.start(record_path=record_path, script=script)
    env = console_environment(
        postgres_url,
        server.url,
        CONSOLE_SEND_RATE=str(RATE),
        CONSOLE_POLL_SECONDS="0.2",
        CONSOLE_BATCH_SIZE="50",
        CONSOLE_SMTP_CONNECTIONS="2",
        CONSOLE_RETRY_BASE_SECONDS="1",
        CONSOLE_RETRY_CAP_SECONDS="2",
        CONSOLE_RETRY_FLOOR_SECONDS="0.5",
        # one counted failure in the window would open the breaker
        CONSOLE_BREAKER_WINDOW_ATTEMPTS="4",
        CONSOLE_BREAKER_FAILURE_RATE="0.25",
    )
    workers = [worker_process(env, tmp_path) for _ in range(WORKERS)]
    throttled_at = step_at = full_at = None
    try:
        for worker in workers:
            worker.start()
        wait_for_workers(engine, WORKERS, time.monotonic() + START_TIMEOUT_SECONDS, workers)
        deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
        queue_orders(session_factory, ORDERS)
        while submitted(engine) < ORDERS:
            assert all(w.process.poll() is None for w in workers), "a worker died"
            assert time.monotonic() < deadline, f"not drained: {submitted(engine)} submitted"
            now = time.time()
            if throttled_at is None:
                refused = [r.received_at for r in read_records(record_path) if r.result == "454"]
                throttled_at = min(refused) if refused else None
            elif step_at is None and now >= throttled_at + 1 + HALVED_SECONDS:
                # the penalty's minute is over, and two steps of the recovery: 0.8
                shift = tb.HOLD_SECONDS + 2 * tb.STEP_SECONDS
                halved_factor, slowed_at = move_slowed_at_back(engine, shift)
                step_at = time.time()
            elif step_at is not None and full_at is None and now >= step_at + STEP_SECONDS:
                move_slowed_at_back(engine, 2 * tb.STEP_SECONDS)  # 1.0: recovered
                full_at = time.time()
            time.sleep(0.05)
    finally:
        exit_codes = [worker.stop(10) for worker in workers]
        server.stop()
    try:
        with Session(engine) as session:
            breakers = session.execute(select(LaneBreaker.lane, LaneBreaker.state)).all()
            throttled_attempts = session.execute(
                select(Attempt.outcome, Attempt.reply_code).where(Attempt.reply_code == 454)
            ).all()
            attempts = session.execute(select(func.count()).select_from(Attempt)).scalar_one()
            done = session.execute(
                select(func.count()).where(Intent.status == SUBMITTED)
            ).scalar_one()
    finally:
        engine.dispose()
    assert exit_codes == [0] * WORKERS
    assert step_at is not None and full_at is not None, "the drain ended too early"

    records = read_records(record_path)
    accepted = sorted(r.received_at for r in records if r.result == "250")
    halved = accepted_rate(accepted, throttled_at + 1, step_at)
    step = accepted_rate(accepted, step_at + SETTLE, full_at)
    full_end = full_at + SETTLE + FULL_SECONDS
    full = accepted_rate(accepted, full_at + SETTLE, full_end)
    before = accepted_rate(accepted, accepted[0] + 1, throttled_at)  # after the first burst
    print(
        f"accepted {before:.1f}/s before the 454s, {halved:.1f}/s after (factor "
        f"{halved_factor}), {step:.1f}/s at 0.8, {full:.1f}/s recovered; breakers {breakers}"
    )
    assert max(accepted) > full_end, "the backlog ran out before the recovered rate was measured"
    assert halved_factor == 0.5, "halved once, not more: the three 454s came together"
    assert abs(slowed_at - throttled_at) < 1.0
    assert abs(halved - RATE / 2) <= TOLERANCE * RATE / 2, f"{halved:.1f}/s after the 454s"
    assert abs(step - 0.8 * RATE) <= TOLERANCE * 0.8 * RATE, f"{step:.1f}/s at the third step"
    assert abs(full - RATE) <= TOLERANCE * RATE, f"{full:.1f}/s once recovered"

    # the throttled intents were retried, and accepted; nothing else was refused
    assert [r.result for r in records].count("454") == len(THROTTLED_ARRIVALS)
    assert len(accepted) == ORDERS and done == ORDERS
    assert attempts == ORDERS + len(THROTTLED_ARRIVALS)
    assert throttled_attempts == [(TRANSIENT, 454)] * len(THROTTLED_ARRIVALS)
    assert all(state == "closed" for _, state in breakers), breakers
    logs = "".join(worker.log_path.read_text() for worker in workers)
    assert logs.count("send rate halved") == 1, "one worker halved the shared rate, once"
    assert "circuit breaker opened" not in logs
