"""The send budget in the claim, on SQLite and PostgreSQL: the shared rate's bucket (one
statement per claim, the core's arithmetic), critical first, the daily quota with its
critical reserve, throttling halving the rate, and no statement at all when unlimited."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from console.core import token_bucket as tb
from console.core.send_result import SendResult
from console.models import Intent
from console.outbox import enqueue
from console.store import send_budget
from console.transports.memory import MemoryTransport
from console.vocabulary import CRITICAL, ENVELOPE, SUBMITTED
from console.worker.claim import SendBudget
from tests.support.backlog import insert_bulk_backlog
from tests.support.claim_steps import in_claim, on_engine

RATE = tb.BucketPolicy.of(10.0)


def enqueue_login_codes(session_factory, count: int, prefix: str = "login") -> list[int]:
    with session_factory() as session:
        ids = [
            enqueue(
                session,
                key=f"{prefix}:{n}",
                to=f"user{n}@example.com",
                template="login-code",
                params={"code": "424242"},
            ).id
            for n in range(count)
        ]
        session.commit()
    return ids


def sent_lanes(session_factory, transport) -> list[str]:
    ids = [email.intent_id for email in transport.sent]
    with session_factory() as session:
        lanes = dict(
            session.execute(select(Intent.id, Intent.lane).where(Intent.id.in_(ids))).all()
        )
    return [lanes[i] for i in ids]


def take_tokens(session_factory, now, want):
    """Tokens taken at `now` in a claim of their own: how many, and how many are left."""
    return in_claim(session_factory.kw["bind"], lambda steps: steps.take_tokens(RATE, now, want))


def test_the_first_claim_ever_finds_an_empty_bucket(session_factory):
    assert take_tokens(session_factory, 1000.0, 50) == (0, 0.0)
    with session_factory() as session:
        assert send_budget.read_bucket(session) == tb.start(1000.0)
    assert take_tokens(session_factory, 1000.5, 50) == (5, 0.0)


def test_a_bucket_made_for_the_quota_alone_starts_empty_too(session_factory):
    in_claim(session_factory.kw["bind"], lambda steps: steps.lock_budget(1000.0))
    assert take_tokens(session_factory, 1000.0, 50) == (0, 0.0)


def test_the_statement_takes_what_the_core_computes(session_factory):
    bucket = tb.start(999.0)
    steps = [(1000.0, 3), (1000.2, 50), (1000.35, 1), (1001.7, 4), (1003.0, 10), (1003.0, 1)]
    take_tokens(session_factory, 999.0, 0)  # creates the bucket, empty
    for now, want in steps:
        bucket, taken = tb.take(RATE, bucket, now, want)
        assert take_tokens(session_factory, now, want) == (taken, pytest.approx(bucket.tokens))
    database = session_factory.kw["bind"]
    assert on_engine(database, lambda engine: engine.halve_rate(1004.0))
    assert not on_engine(database, lambda engine: engine.halve_rate(1004.5)), "once a second"
    halved = tb.halve(bucket, 1004.0)
    for now in (1004.0, 1030.0, 1064.0, 1075.0, 1200.0):
        halved, taken = tb.take(RATE, halved, now, 100)
        assert take_tokens(session_factory, now, 100)[0] == taken, now


def test_workers_together_claim_no_faster_than_the_rate(session_factory, make_worker, clock):
    insert_bulk_backlog(session_factory, 200)
    transport = MemoryTransport()
    workers = [make_worker(transport, budget=SendBudget(RATE, None)) for _ in range(3)]
    start = clock()
    for _ in range(20):  # five seconds, a tick of each worker every quarter second
        for worker in workers:
            worker.run_once()
        clock.advance(0.25)
    elapsed = (clock() - start).total_seconds()
    assert len(transport.sent) <= RATE.rate * elapsed + RATE.burst
    assert len(transport.sent) >= RATE.rate * elapsed - RATE.burst, "and no slower either"


def test_a_login_code_takes_the_token_bulk_leaves_for_it(session_factory, make_worker, clock):
    insert_bulk_backlog(session_factory, 100)
    transport = MemoryTransport()
    worker = make_worker(transport, budget=SendBudget(RATE, None))
    assert worker.run_once().claimed == 0, "the first claim finds the bucket empty"
    clock.advance(1)
    assert worker.run_once().claimed == 9, "the burst less the critical reserve"
    assert worker.run_once().claimed == 0
    enqueue_login_codes(session_factory, 1)
    assert worker.run_once().claimed == 1, "no wait for a token"
    assert sent_lanes(session_factory, transport)[-1] == CRITICAL


def test_the_daily_quota_stops_bulk_and_keeps_the_reserve_for_critical(
    session_factory, make_worker, clock
):
    insert_bulk_backlog(session_factory, 60)
    transport = MemoryTransport()
    quota = tb.DailyQuota.of(50)  # reserve: 3
    worker = make_worker(transport, budget=SendBudget(None, quota), batch_size=20)
    for _ in range(5):
        worker.run_once()
        clock.advance(1)
    assert len(transport.sent) == 47
    enqueue_login_codes(session_factory, 5)
    for _ in range(3):
        worker.run_once()
        clock.advance(1)
    assert sent_lanes(session_factory, transport).count(CRITICAL) == 3
    assert len(transport.sent) == 50
    clock.advance(25 * 3600)
    worker.run_once()
    assert len(transport.sent) == 50 + 13, "a day later: the rest of the bulk backlog"


def test_a_throttling_reply_halves_the_shared_rate(session_factory, make_worker, clock):
    throttled = SendResult(
        ENVELOPE, code=454, reply_text="4.7.0 Throttling failure: Maximum sending rate exceeded."
    )
    transport = MemoryTransport({"reader0@example.com": [throttled]})
    insert_bulk_backlog(session_factory, 5)
    worker = make_worker(transport, budget=SendBudget(RATE, None))
    worker.run_once()  # makes the bucket, empty
    clock.advance(1)
    worker.run_once()
    with session_factory() as session:
        bucket = send_budget.read_bucket(session)
        assert bucket.factor == pytest.approx(0.5)
        assert tb.effective_rate(RATE, bucket, clock().timestamp()) == pytest.approx(5.0)
        statuses = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        assert dict(statuses.all())[SUBMITTED] == 4


BUDGET_STEPS = ("lock_budget", "take_tokens", "sent_since", "settle_budget")


def test_without_limits_the_claim_takes_no_budget_step(session_factory, make_worker, monkeypatch):
    from console.engine.postgres_claim import PostgresClaimSteps
    from console.engine.sqlite_claim import SqliteClaimSteps

    insert_bulk_backlog(session_factory, 5)
    taken = []
    for steps in (SqliteClaimSteps, PostgresClaimSteps):
        for name in BUDGET_STEPS:
            monkeypatch.setattr(steps, name, lambda *args, name=name: taken.append(name))
    worker = make_worker(MemoryTransport())
    assert worker.budget is None
    assert worker.run_once().claimed == 5
    assert taken == []


def test_a_worker_waiting_for_tokens_keeps_its_smtp_connection(session_factory, make_worker, clock):
    from console.transports.smtp import SmtpTransport
    from tests.support.smtp_server import ScriptedSMTPServer

    enqueue_login_codes(session_factory, 3)
    slow = tb.BucketPolicy.of(1.0)
    with ScriptedSMTPServer() as server:
        transport = SmtpTransport(server.url, timeout_seconds=5)
        worker = make_worker(transport, budget=SendBudget(slow, None))
        sends = []
        for _ in range(18):  # 4.5 s: a token a second (none at first), a tick every 0.25 s
            clock.advance(0.25)
            sends.append(worker.run_once().claimed)
        assert sum(sends) == 3 and 0 in sends
        assert server.connections_opened == 1, "the waits for a token closed the connection"
        clock.advance(1)
        assert worker.run_once().claimed == 0  # nothing left to send: the connection goes
        assert transport._idle == []
