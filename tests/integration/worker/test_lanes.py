"""Lanes: behind 20,000 queued bulk intents, a critical one waits at most one batch."""

from __future__ import annotations

import pytest

from console.models import Intent, utcnow
from console.transports.memory import MemoryTransport
from console.vocabulary import DATA_SENT, SUBMITTED
from tests.support.backlog import insert_bulk_backlog
from tests.support.orders import enqueue_login_code

BULK_BACKLOG = 20_000
BATCH_SIZE = 50


class EnqueueDuringSend(MemoryTransport):
    """Accept everything; while the `at`-th body is on its way, commit a login code."""

    def __init__(self, session_factory, at: int) -> None:
        super().__init__()
        self.session_factory, self.at = session_factory, at
        self.sends = 0
        self.critical_id: int | None = None
        self.sends_when_enqueued: int | None = None

    async def send(self, email, on_stage):
        async def enqueue_mid_batch(staged_email, stage):
            await on_stage(staged_email, stage)
            if stage == DATA_SENT:
                self.sends += 1
                if self.sends == self.at:
                    self._enqueue_login_code()

        return await super().send(email, enqueue_mid_batch)

    def _enqueue_login_code(self) -> None:
        self.critical_id = enqueue_login_code(self.session_factory)
        self.sends_when_enqueued = self.sends


@pytest.mark.slow
def test_a_critical_intent_enqueued_mid_drain_goes_out_in_the_next_batch(
    session_factory, make_worker
):
    insert_bulk_backlog(session_factory, BULK_BACKLOG)
    transport = EnqueueDuringSend(session_factory, at=2 * BATCH_SIZE + 7)  # inside batch 3
    worker = make_worker(
        transport,
        clock=utcnow,  # the real time: the intent enqueued mid-drain must be due at once
        mail_from="shop@example.com",
        max_attempts=8,
        batch_size=BATCH_SIZE,
    )
    batches = 0
    while transport.critical_id is None:
        assert worker.run_once().claimed == BATCH_SIZE
        batches += 1
    assert batches == 3
    batches_after_enqueue = 0
    while not any(email.intent_id == transport.critical_id for email in transport.sent):
        report = worker.run_once()
        batches_after_enqueue += 1
        assert report.claimed == BATCH_SIZE, "the bulk backlog keeps every batch full"

    assert batches_after_enqueue == 1, "claimed in the very next batch"
    critical_position = [e.intent_id for e in transport.sent].index(transport.critical_id)
    assert critical_position == 3 * BATCH_SIZE, "first of its batch"
    bulk_sent_while_waiting = critical_position - transport.sends_when_enqueued
    assert bulk_sent_while_waiting < BATCH_SIZE, "it waited less than one batch of bulk"
    with session_factory() as session:
        assert session.get(Intent, transport.critical_id).status == SUBMITTED
