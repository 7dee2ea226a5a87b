"""``console worker`` and ``console serve``: the send loop alone, or beside the web console."""

from __future__ import annotations

import logging
import os
import signal
import threading

import click
from flask import current_app
from flask.cli import with_appcontext

from console import pg_wakeup
from console.metrics import start_metrics_server
from console.ops_jobs import start_ops_jobs
from console.scheduler import start_embedded_worker
from console.worker import Worker, run_loop

log = logging.getLogger(__name__)

CRASH_VARIABLE = "CONSOLE_TEST_CRASH_AT"  # test-only: see console.worker.CRASH_POINTS


@click.command("worker")
@with_appcontext
def worker_command() -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and exit."""
    settings = current_app.extensions["console.settings"]
    worker = Worker.from_settings(settings, crash_at=os.environ.get(CRASH_VARIABLE) or None)
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
        _stop_quietly(listener)
        if metrics_server is not None:
            metrics_server.shutdown()
        jobs.shutdown()
        worker.close()
    log.info("worker stopped", extra=dict(worker_id=worker.worker_id))


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the web server like Ctrl-C: waitress finishes the requests in flight."""
    raise KeyboardInterrupt


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@with_appcontext
def serve_command(host: str, port: int) -> None:
    """Serve the console (waitress) with the send loop running in the same process."""
    import waitress

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    embedded = start_embedded_worker(app)
    settings = app.extensions["console.settings"]
    listener = pg_wakeup.listener_for(settings.database_url)  # wakes `embedded` via wakeup
    jobs = start_ops_jobs(settings)
    server = waitress.create_server(app, host=host, port=port)

    signal.signal(signal.SIGTERM, _interrupt)
    click.echo(f"console on http://{host}:{server.effective_port} (embedded worker running)")
    try:
        server.run()  # returns on SIGINT or SIGTERM, once the requests in flight are served
    finally:
        log.info("stopping the console")
        server.close()
        _stop_quietly(listener)
        jobs.shutdown()
        embedded.shutdown()


def _stop_quietly(listener: pg_wakeup.NotifyListener | None) -> None:
    if listener is not None:
        listener.stop()
