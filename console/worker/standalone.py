"""``console worker``: the send loop in a process of its own, started without the web app.

Start-up reads the settings, configures logging and the outbox, and builds the
worker; neither Flask's app nor its blueprints are built, so the first claim
follows the process start closely. The loop ticks until SIGTERM or SIGINT,
again at once while batches come back full, else after the poll interval or as
soon as it is woken (an enqueue on PostgreSQL, a stop request).
"""

from __future__ import annotations

import logging
import signal
import threading

from console.config import Settings, load_settings
from console.ops import logs
from console.paths import instance_dir
from console.worker.loop import Worker
from console.worker.tick import TickReport

log = logging.getLogger("console.worker.loop")


def worker_settings() -> Settings:
    """The settings from the environment, with logging and the outbox configured by them."""
    from console import outbox

    settings = load_settings(instance_path=instance_dir())
    logs.configure_logging(secrets=logs.settings_secrets(settings), level=settings.log_level)
    outbox.configure(settings)  # the address key of hashed suppressions, the templates
    return settings


def run_worker(settings: Settings) -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and return."""
    from console.ops.jobs import start_ops_jobs
    from console.ops.metrics import start_metrics_server
    from console.worker import pg_wakeup

    worker = Worker.from_settings(settings, crash_at=settings.test_crash_at)
    wake = threading.Event()

    def stop(signum: int, frame: object) -> None:
        log.info("stopping after the sends in flight", extra=dict(worker_id=worker.worker_id))
        worker.request_stop()
        wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("worker started", extra=dict(worker_id=worker.worker_id))
    listener = pg_wakeup.listener_for(settings.database_url, on_notify=wake.set)
    jobs = start_ops_jobs(settings)
    metrics_server = start_metrics_server(settings, jobs.session_factory)
    try:
        run_loop(worker, poll_seconds=settings.poll_seconds, wake=wake)
    finally:
        if listener is not None:
            listener.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
        jobs.shutdown()
        worker.close()
    log.info("worker stopped", extra=dict(worker_id=worker.worker_id))


def run_loop(worker: Worker, *, poll_seconds: float, wake: threading.Event) -> None:
    """Tick until ``worker.request_stop()``: again at once while batches come back full,
    else after `poll_seconds` or as soon as `wake` is set (an enqueue, a stop request).
    """
    while not worker.stopping:
        wake.clear()
        try:
            report = worker.run_once()
        except Exception:  # noqa: BLE001 - e.g. the database restarting: try again next poll
            log.exception("worker tick failed", extra=dict(worker_id=worker.worker_id))
            report = TickReport()
        if report.claimed >= worker.settings.batch_size:
            continue
        wake.wait(poll_seconds)
