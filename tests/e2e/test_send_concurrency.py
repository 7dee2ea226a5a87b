"""Several `console worker` processes drain one queue: every Message-ID arrives exactly once."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import time

import pytest
from sqlalchemy import func, select

from console.models import Attempt, Intent
from console.vocabulary import SUBMITTED
from tests.support.backlog import queue_orders
from tests.support.commands import CONSOLE_BIN
from tests.support.smtp_server import SubprocessSMTPServer

pytestmark = pytest.mark.slow

DRAIN_TIMEOUT_SECONDS = 240


def status_counts(session_factory) -> dict[str, int]:
    with session_factory() as session:
        rows = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        return dict(rows.all())


def start_workers(count: int, db_url: str, smtp_url: str, log_dir) -> list[subprocess.Popen]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    environ.update(
        CONSOLE_DATABASE_URL=db_url,
        CONSOLE_SECRET_KEY="test" * 8,
        CONSOLE_SMTP_URL=smtp_url,
        CONSOLE_POLL_SECONDS="0.2",
        CONSOLE_BATCH_SIZE="50",
        CONSOLE_LOG_LEVEL="WARNING",
    )
    processes = []
    for n in range(count):
        with open(log_dir / f"worker{n}.log", "wb") as log:
            processes.append(
                subprocess.Popen(
                    [CONSOLE_BIN, "worker"],
                    env=environ,
                    cwd=log_dir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return processes


# (database, worker processes, intents, the relay offers PIPELINING and CHUNKING)
RUNS = [("postgresql", 4, 2500, True), ("sqlite", 2, 1000, False)]


@pytest.mark.parametrize("backend,workers,intents,extensions", RUNS, indirect=["backend"])
def test_workers_in_parallel_send_each_intent_exactly_once(
    backend, workers, intents, extensions, db_url, session_factory, tmp_path
):
    queue_orders(session_factory, intents)
    server = SubprocessSMTPServer.start(
        record_path=tmp_path / "received.jsonl", pipelining=extensions, chunking=extensions
    )
    processes = start_workers(workers, db_url, server.url, tmp_path)
    try:
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while status_counts(session_factory).get(SUBMITTED, 0) < intents:
            assert all(p.poll() is None for p in processes), "a worker died"
            assert time.monotonic() < deadline, status_counts(session_factory)
            time.sleep(0.25)
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        exit_codes = [process.wait(60) for process in processes]
        server.stop()
    assert exit_codes == [0] * workers

    delivered = server.delivered_counts()
    with session_factory() as session:
        message_ids = set(session.scalars(select(Intent.message_id)))
        attempts_per_worker = collections.Counter(session.scalars(select(Attempt.worker_id)))
        max_attempts = session.execute(select(func.max(Intent.attempt_count))).scalar_one()
    assert status_counts(session_factory) == {SUBMITTED: intents}
    assert set(delivered) == message_ids and len(message_ids) == intents
    assert set(delivered.values()) == {1}, "a Message-ID arrived twice"
    assert sum(attempts_per_worker.values()) == intents and max_attempts == 1
    assert len(attempts_per_worker) >= 2, f"the work was shared: {attempts_per_worker}"
