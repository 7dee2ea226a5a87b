"""A `console worker` asked to stop while it asks a slow provider stops within one lookup deadline.

The worker sends through Postmark's HTTP API at a local server whose lookup answers
come complete but slowly (each well inside the lookup's deadline); ten ambiguous
intents an hour old are waiting to be asked about. SIGTERM lands once the server has
the first lookup request: the process exits 0 within the deadline and a margin, however
many intents were left to ask.
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from console.ops.jobs.provider_asking import LOOKUP_TIMEOUT_SECONDS
from tests.support import slow_provider
from tests.support.slow_provider import add_ambiguous_intents
from tests.support.worker_runs import start_worker, worker_environment

pytestmark = pytest.mark.slow

AMBIGUOUS_INTENTS = 10
ANSWER_SECONDS = 4.0  # each lookup's answer: complete, well inside the deadline
START_SECONDS = 60.0
STOP_WITHIN_SECONDS = LOOKUP_TIMEOUT_SECONDS + 15.0


def test_sigterm_during_a_slow_lookup_stops_within_one_deadline(db_url, session_factory, tmp_path):
    add_ambiguous_intents(session_factory, AMBIGUOUS_INTENTS)
    server = slow_provider.slow_but_answering(ANSWER_SECONDS)
    environ = worker_environment(
        db_url,
        "smtp://127.0.0.1:9",  # never dialled: the HTTP transport sends
        CONSOLE_TRANSPORT="http",
        CONSOLE_PROVIDER="postmark",
        CONSOLE_HTTP_PROVIDER_URL=server.base_url,
        CONSOLE_HTTP_PROVIDER_KEY="server-token-0123",
        CONSOLE_RECONCILE_SECONDS="0.5",
        CONSOLE_RECONCILE_AFTER_SECONDS="3600",
    )
    worker = start_worker(environ, tmp_path / "worker.log")
    try:
        server.wait_for_requests(1, START_SECONDS)
        assert worker.poll() is None, "the worker exited before it was stopped"
        worker.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        try:
            status = worker.wait(STOP_WITHIN_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_WITHIN_SECONDS:g} s after SIGTERM")
        waited = time.monotonic() - stopped_at
    finally:
        worker.kill()
        worker.wait()
        server.close()
    log = (tmp_path / "worker.log").read_text()
    assert status == 0, log
    assert waited < STOP_WITHIN_SECONDS
    assert len(server.requests) < AMBIGUOUS_INTENTS, "the run ended with the stop"
