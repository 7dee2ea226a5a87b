"""The ``console`` command: a Flask CLI group around the app factory, and its commands.

``serve`` (web console with the embedded worker), ``worker`` (the send loop
alone), ``db`` (Flask-Migrate), ``user`` (ops/user_commands), ``prune``, ``forget``,
``hold``, ``release``, ``holds`` (ops/hold_commands) and ``demo``. Each
command reads the settings the app was built with and hands them on: nothing
below this module reaches for Flask's ``current_app``.
"""

from __future__ import annotations

import logging
import signal
import threading

import click
from flask import current_app
from flask.cli import FlaskGroup, with_appcontext
from sqlalchemy.orm import Session

from console.app import create_app
from console.config import Settings
from console.ops.hold_commands import HOLD_COMMANDS
from console.ops.jobs import start_ops_jobs
from console.ops.metrics import start_metrics_server
from console.ops.retention import prune
from console.ops.user_commands import user_cli
from console.web.extensions import db
from console.web.ops import SCHEDULER_EXTENSION
from console.worker import pg_wakeup
from console.worker.loop import Worker
from console.worker.scheduler_bridge import start_embedded_worker
from console.worker.standalone import run_loop

log = logging.getLogger(__name__)


def _settings() -> Settings:
    return current_app.extensions["console.settings"]


@click.group(cls=FlaskGroup, create_app=create_app, add_version_option=False)
def main() -> None:
    """Operator console and worker for transactional email."""


@main.command("worker")
@with_appcontext
def worker_command() -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and exit."""
    settings = _settings()
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
        _stop_quietly(listener)
        if metrics_server is not None:
            metrics_server.shutdown()
        jobs.shutdown()
        worker.close()
    log.info("worker stopped", extra=dict(worker_id=worker.worker_id))


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the web server like Ctrl-C: waitress finishes the requests in flight."""
    raise KeyboardInterrupt


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@with_appcontext
def serve_command(host: str, port: int) -> None:
    """Serve the console (waitress) with the send loop running in the same process."""
    import waitress

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    settings = _settings()
    embedded = start_embedded_worker(settings)
    app.extensions[SCHEDULER_EXTENSION] = embedded  # read by /healthz
    listener = pg_wakeup.listener_for(settings.database_url)  # wakes `embedded` via wakeup
    jobs = start_ops_jobs(settings)
    # waitress drops X-Forwarded-* unless told; the app's ProxyFix reads CONSOLE_TRUSTED_PROXIES
    keep_forwarded = {"clear_untrusted_proxy_headers": False} if settings.trusted_proxies else {}
    server = waitress.create_server(app, host=host, port=port, **keep_forwarded)

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


@main.command("prune")
@click.option("--days", type=click.FloatRange(min=0, min_open=True), help="Retention period.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Rows per transaction.")
@with_appcontext
def prune_command(days: float | None, batch_size: int | None) -> None:
    """Scrub finished mail past the retention period; delete it past the deletion horizon."""
    settings = _settings()
    report = prune(
        lambda: Session(db.engine),
        retention_days=days or settings.retention_days,
        batch_size=batch_size or settings.retention_batch_size,
        delete_days=settings.retention_delete_days,
        address_key=settings.secret_key,
    )
    click.echo(
        f"scrubbed {report.intents_scrubbed} intents, trimmed {report.attempts_trimmed} "
        f"attempt replies and {report.events_trimmed} event payloads; "
        f"deleted {report.intents_deleted} intents and {report.events_deleted} unmatched "
        f"events; cleared {report.suppression_notes_cleared} suppression notes; hashed "
        f"{report.audit_targets_hashed} audit targets; in {report.batches} batches"
    )


@main.command("forget")
@click.argument("address")
@click.option("--reason", required=True, help="Why (e.g. the request's reference); audited.")
@click.option("--cancel", is_flag=True, help="Cancel the address's unsent mail first.")
@with_appcontext
def forget_command(address: str, reason: str, cancel: bool) -> None:
    """Erase ADDRESS from every table (an erasure request); a suppression stays as its hash."""
    import getpass

    from console.store import erasure
    from console.store.actions import ActionRefused

    try:
        report = erasure.forget(
            db.session, address, actor=f"cli:{getpass.getuser()}", reason=reason,
            secret_key=_settings().secret_key, cancel=cancel,
        )  # fmt: skip
        db.session.commit()
    except ActionRefused as exc:
        db.session.rollback()
        raise click.ClickException(str(exc)) from None
    click.echo(erasure.summary(report))


main.add_command(user_cli)
for _command in HOLD_COMMANDS:  # hold, release, holds
    main.add_command(_command)


def _register_demo() -> None:
    from console.demo.command import demo_command

    main.add_command(demo_command)


_register_demo()
