"""The embedded worker of `console serve`: quiet about the runs it skips, its stop recorded."""

from __future__ import annotations

import asyncio
import logging
import time

from apscheduler.events import EVENT_JOB_MAX_INSTANCES

from console.models import Intent, utcnow
from console.outbox import enqueue
from console.state_tables import WorkerHeartbeat
from console.transports.memory import MemoryTransport
from console.vocabulary import SUBMITTED
from console.worker.running import EmbeddedWorker

LOGIN = dict(template="login-code", params={"code": "123456"})
SEND_SECONDS = 0.25  # each send outlasts several poll intervals
POLL_SECONDS = 0.02


class SlowTransport(MemoryTransport):
    async def send(self, email, on_stage):
        await asyncio.sleep(SEND_SECONDS)
        return await super().send(email, on_stage)


def wait_until(condition, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_runs_skipped_behind_a_slow_run_are_not_logged(session_factory, make_worker, caplog):
    with session_factory() as session:
        ids = [enqueue(session, key=f"login:{n}", to=f"u{n}@example.com", **LOGIN).id
               for n in range(3)]  # fmt: skip
        session.commit()
    worker = make_worker(SlowTransport())
    worker.clock = utcnow
    skipped = []
    embedded = EmbeddedWorker(worker, POLL_SECONDS)
    embedded.scheduler.add_listener(skipped.append, EVENT_JOB_MAX_INSTANCES)
    caplog.set_level(logging.INFO, logger="apscheduler")
    embedded.start()
    try:

        def all_sent() -> bool:
            with session_factory() as session:
                return all(session.get(Intent, i).status == SUBMITTED for i in ids)

        wait_until(all_sent)
    finally:
        embedded.shutdown()
    assert skipped, "an interval came while a run was under way"
    assert "maximum number of running instances" not in caplog.text
    assert "Scheduler has been shut down" in caplog.text, "the scheduler's other lines pass"


def test_shutdown_records_the_stop_on_the_heartbeat(session_factory, make_worker):
    worker = make_worker(MemoryTransport())
    worker.clock = utcnow
    embedded = EmbeddedWorker(worker, POLL_SECONDS).start()
    try:

        def beat() -> WorkerHeartbeat | None:
            with session_factory() as session:
                return session.get(WorkerHeartbeat, worker.worker_id)

        wait_until(lambda: beat() is not None)
        assert beat().stopped_at is None
    finally:
        embedded.shutdown()
    with session_factory() as session:
        row = session.get(WorkerHeartbeat, worker.worker_id)
    assert row.stopped_at is not None and row.stopped_at >= row.last_tick_at
