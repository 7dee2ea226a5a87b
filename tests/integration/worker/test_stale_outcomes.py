"""An outcome whose lease was taken while its send was out changes nothing, alone or in a
group of records: no status and no suppression. SQLite and PostgreSQL, one
connection and four (the records of several sends then go in one statement)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text

from console.core.send_result import SendResult
from console.models import Intent, Suppression
from console.transports.memory import MemoryTransport
from console.vocabulary import AMBIGUOUS, ENVELOPE, SENDING, SUBMITTED
from console.worker.guard import GuardPolicy
from tests.support.orders import enqueue_orders

STALE = [f"gone{n}@example.com" for n in range(6)]
FINE = [f"fine{n}@example.com" for n in range(10)]


class LeaseTakenDuringTheSend(MemoryTransport):
    """Answers each of `stale` with a refusal of the mailbox, after another worker's sweep
    took the intent: its outcome arrives stale."""

    def __init__(self, engine, stale: list[str]) -> None:
        unknown = SendResult(ENVELOPE, code=550, reply_text="5.1.1 <x>: user unknown")
        super().__init__({recipient: [unknown] for recipient in stale})
        self.engine = engine

    async def send(self, email, on_stage):
        result = await super().send(email, on_stage)
        if email.recipient in self.script:
            with self.engine.begin() as connection:  # the sweep: ambiguous, lease gone
                connection.execute(
                    text(
                        "UPDATE email_intent SET status = :status, lease_token = NULL"
                        " WHERE id = :id"
                    ),
                    {"status": AMBIGUOUS, "id": email.intent_id},
                )
        return result


@pytest.mark.parametrize("connections", [1, 4])
def test_a_stale_outcome_suppresses_nobody_and_leaves_the_intent_as_the_sweep_left_it(
    engine, session_factory, make_worker, connections
):
    enqueue_orders(session_factory, [r for pair in zip(STALE, FINE, strict=False) for r in pair])
    enqueue_orders(session_factory, FINE[len(STALE) :], prefix="more")
    transport = LeaseTakenDuringTheSend(engine, STALE)
    worker = make_worker(transport, concurrency=connections, guard_policy=GuardPolicy())

    worker.run_once()

    with session_factory() as session:
        statuses = dict(session.execute(select(Intent.recipient, Intent.status)).all())
        suppressed = session.scalars(select(Suppression.recipient)).all()
    assert {statuses[r] for r in STALE} == {AMBIGUOUS}, "as the sweep left them"
    assert {statuses[r] for r in FINE} == {SUBMITTED}
    assert suppressed == [], "a stale refusal suppresses nobody"


class ReclaimedDuringTheSend(LeaseTakenDuringTheSend):
    """As ``LeaseTakenDuringTheSend``, but the sweep's intent was claimed again by another
    worker before the outcome arrived: still ``sending``, under that worker's lease."""

    async def send(self, email, on_stage):
        result = await MemoryTransport.send(self, email, on_stage)
        if email.recipient in self.script:
            with self.engine.begin() as connection:
                connection.execute(
                    text("UPDATE email_intent SET lease_token = :token WHERE id = :id"),
                    {"token": OTHER_WORKERS_LEASE, "id": email.intent_id},
                )
        return result


OTHER_WORKERS_LEASE = "lease-of-another-worker"


@pytest.mark.parametrize("connections", [1, 4])
def test_an_outcome_arriving_after_another_worker_claimed_the_intent_changes_nothing(
    engine, session_factory, make_worker, connections
):
    """Only the lease token tells the two workers apart: the status is ``sending`` for both."""
    enqueue_orders(session_factory, [r for pair in zip(STALE, FINE, strict=False) for r in pair])
    transport = ReclaimedDuringTheSend(engine, STALE)
    worker = make_worker(transport, concurrency=connections, guard_policy=GuardPolicy())

    worker.run_once()

    with session_factory() as session:
        rows = session.execute(select(Intent.recipient, Intent.status, Intent.lease_token))
        intents = {row.recipient: (row.status, row.lease_token) for row in rows}
        suppressed = session.scalars(select(Suppression.recipient)).all()
    assert {intents[r] for r in STALE} == {(SENDING, OTHER_WORKERS_LEASE)}, "the other's, still"
    assert {intents[r][0] for r in FINE[: len(STALE)]} == {SUBMITTED}
    assert suppressed == [], "a stale refusal suppresses nobody"


class FinishingTogether(LeaseTakenDuringTheSend):
    """As ``LeaseTakenDuringTheSend``, each send waiting for the others of its round of
    `senders`: their outcomes reach the record queue together and go in one group."""

    def __init__(self, engine, stale: list[str], senders: int) -> None:
        super().__init__(engine, stale)
        self.senders = senders
        self.barrier: asyncio.Barrier | None = None

    async def send(self, email, on_stage):
        result = await super().send(email, on_stage)
        if self.barrier is None:
            self.barrier = asyncio.Barrier(self.senders)
        async with asyncio.timeout(30):  # a round never completed fails the test, not hangs
            await self.barrier.wait()
        return result


def test_stale_outcomes_recorded_in_one_group_are_reported_stale_not_sent(
    engine, session_factory, make_worker
):
    """The tick's report and its log count a refused record as stale, also in a group."""
    senders = 4
    enqueue_orders(session_factory, [r for pair in zip(STALE, FINE, strict=False) for r in pair])
    enqueue_orders(session_factory, FINE[len(STALE) :], prefix="more")
    transport = FinishingTogether(engine, STALE, senders)
    worker = make_worker(transport, concurrency=senders)

    report = worker.run_once()

    assert report.stale == len(STALE)
    assert dict(report.statuses) == {SUBMITTED: len(FINE)}
    with session_factory() as session:
        statuses = dict(session.execute(select(Intent.recipient, Intent.status)).all())
    assert {statuses[r] for r in STALE} == {AMBIGUOUS}, "as the sweep left them"
