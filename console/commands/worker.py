"""``console worker``: the send loop in a process of its own, started without the web app.

Start-up reads the settings, configures logging and the outbox, and builds the
worker; neither Flask's app nor its blueprints are built, so the first claim
follows the process start closely. The loop (``console.worker.running``) ticks
until SIGTERM or SIGINT; beside it run the wake-up listener, the ops jobs and
``/metrics``.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
from typing import NoReturn

from console import logs
from console.config import Settings, load_settings
from console.paths import instance_dir
from console.words.refusals import said
from console.worker.claim import record_clean_stop
from console.worker.loop import Worker
from console.worker.running import run_loop

log = logging.getLogger("console.worker.loop")


def worker_settings() -> Settings:
    """The settings from the environment, with logging and the outbox configured by them."""
    from console import outbox

    settings = load_settings(instance_path=instance_dir())
    logs.configure_logging(secrets=logs.settings_secrets(settings), level=settings.log_level)
    outbox.configure(settings)  # the address key of hashed suppressions, the templates
    return settings


def main() -> None:
    """``console worker``: a bad setting is one line naming it on stderr and exit status 1;
    a database unreachable, without or behind the schema, one line and exit status 2."""
    from console.config import ConfigError
    from console.store.schema_check import DatabaseNotReady, check_database

    try:
        settings = worker_settings()
    except ConfigError as error:
        _refuse(error, 1)
    try:
        check_database(settings.database_url)
    except DatabaseNotReady as error:
        _refuse(error, 2)
    run_worker(settings)


def _refuse(error: Exception, status: int) -> NoReturn:
    print(f"Error: {said(error)}", file=sys.stderr)
    raise SystemExit(status) from None


def run_worker(settings: Settings) -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and the stop."""
    worker = Worker.from_settings(settings, crash_at=settings.test_crash_at)
    wake = threading.Event()

    def stop(signum: int, frame: object) -> None:
        log.info("stopping after the sends in flight", extra=dict(worker_id=worker.worker_id))
        worker.request_stop()
        wake.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("worker started", extra=dict(worker_id=worker.worker_id))
    services = _Services()
    try:
        run_loop(
            worker,
            poll_seconds=settings.poll_seconds,
            wake=wake,
            after_first=lambda: services.start(settings, wake),
        )
    finally:
        services.stop()
        worker.close()
    record_clean_stop(worker.session_factory, worker.worker_id, worker.clock())
    worker.session_factory.kw["bind"].dispose()  # the worker's own engine, opened again
    log.info("worker stopped", extra=dict(worker_id=worker.worker_id))


@dataclasses.dataclass
class _Services:
    """What runs beside the loop: the PostgreSQL wake-up listener, the ops jobs, /metrics.

    Started after the first tick, so a backlog's first batch does not wait for them.
    """

    listener: object | None = None
    jobs: object | None = None
    metrics_server: object | None = None

    def start(self, settings: Settings, wake: threading.Event) -> None:
        from console.engine import pg_wakeup
        from console.ops.jobs.schedule import start_ops_jobs
        from console.ops.metrics.prometheus import start_metrics_server

        self.listener = pg_wakeup.listener_for(settings.database_url, on_notify=wake.set)
        self.jobs = start_ops_jobs(settings)
        self.metrics_server = start_metrics_server(settings, self.jobs.session_factory)
        wake.set()  # one more look at once: an enqueue's wake-up may have come before it

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.stop()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        if self.jobs is not None:
            self.jobs.shutdown()
