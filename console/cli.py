"""The ``console`` command: a Flask CLI group around the app factory, and its commands.

``serve`` (web console with the embedded worker), ``worker`` (the send loop
alone), ``db`` (Flask-Migrate), ``user`` (ops/user_commands), ``prune``, ``forget``,
``hold``, ``release``, ``holds`` (ops/hold_commands) and ``demo``. Each
command reads the settings the app was built with and hands them on: nothing
below this module reaches for Flask's ``current_app``. ``worker`` builds no app:
it reads the settings itself (console.worker.standalone), so it starts sooner.
"""

from __future__ import annotations

import importlib
import logging
import signal

import click
from flask import current_app
from flask.cli import FlaskGroup, with_appcontext
from sqlalchemy.orm import Session

from console.config import ConfigError, Settings

log = logging.getLogger(__name__)


def _settings() -> Settings:
    return current_app.extensions["console.settings"]


def _create_app():
    """The web app, built only for the commands that need it (not ``worker``)."""
    from console.app import create_app

    try:
        return create_app()
    except ConfigError as error:  # a bad setting: one line naming it, no traceback
        raise click.ClickException(str(error)) from None


class StartRefused(click.ClickException):
    """A command that cannot start: one line on stderr, exit status 2."""

    exit_code = 2


def check_database(url: str) -> None:
    """Refuse to start (StartRefused) on a database unreachable, without or behind the schema."""
    from console.store.schema_check import DatabaseNotReady
    from console.store.schema_check import check_database as check

    try:
        check(url)
    except DatabaseNotReady as error:
        raise StartRefused(str(error)) from None


class ConsoleGroup(FlaskGroup):
    """Flask's command group, with the commands below imported only when run (or listed).

    ``console worker`` then starts without importing the web app or its extensions.
    """

    LAZY_COMMANDS = {
        "demo": "console.demo.command:demo_command",
        "user": "console.ops.user_commands:user_cli",
        "hold": "console.ops.hold_commands:hold_command",
        "release": "console.ops.hold_commands:release_command",
        "holds": "console.ops.hold_commands:holds_command",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:  # ours: no scan of installed packages for Flask plugins
            return self.commands[name]
        if name in self.LAZY_COMMANDS:
            module_name, attribute = self.LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module_name), attribute)
        return super().get_command(ctx, name)


@click.group(cls=ConsoleGroup, create_app=_create_app, add_version_option=False)
def main() -> None:
    """Operator console and worker for transactional email."""


@main.command("worker")
def worker_command() -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and exit."""
    from console.worker.standalone import main as worker_main

    worker_main()


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

    from console.ops.jobs import start_ops_jobs
    from console.web.ops import SCHEDULER_EXTENSION
    from console.web.request_size import largest_body_bytes
    from console.worker import pg_wakeup
    from console.worker.scheduler_bridge import start_embedded_worker

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    settings = _settings()
    check_database(settings.database_url)
    embedded = start_embedded_worker(settings)
    app.extensions[SCHEDULER_EXTENSION] = embedded  # read by /healthz
    listener = pg_wakeup.listener_for(settings.database_url)  # wakes `embedded` via wakeup
    jobs = start_ops_jobs(settings)
    # waitress drops X-Forwarded-* unless told; the app's ProxyFix reads CONSOLE_TRUSTED_PROXIES
    keep_forwarded = {"clear_untrusted_proxy_headers": False} if settings.trusted_proxies else {}
    most = largest_body_bytes(settings)  # waitress stops reading a body no route would read
    server = waitress.create_server(
        app, host=host, port=port, max_request_body_size=most, **keep_forwarded
    )

    signal.signal(signal.SIGTERM, _interrupt)
    click.echo(f"console on http://{host}:{server.effective_port} (embedded worker running)")
    try:
        server.run()  # returns on SIGINT or SIGTERM, once the requests in flight are served
    finally:
        log.info("stopping the console")
        server.close()
        if listener is not None:
            listener.stop()
        jobs.shutdown()
        embedded.shutdown()


@main.command("prune")
@click.option("--days", type=click.FloatRange(min=0, min_open=True), help="Retention period.")
@click.option("--batch-size", type=click.IntRange(min=1), help="Rows per transaction.")
@with_appcontext
def prune_command(days: float | None, batch_size: int | None) -> None:
    """Scrub finished mail past the retention period; delete it past the deletion horizon."""
    from console.core.plurals import plural
    from console.ops.retention import prune
    from console.web.extensions import db

    settings = _settings()
    report = prune(
        lambda: Session(db.engine),
        retention_days=days or settings.retention_days,
        batch_size=batch_size or settings.retention_batch_size,
        delete_days=settings.retention_delete_days,
        address_key=settings.secret_key,
    )
    click.echo(
        f"scrubbed {plural(report.intents_scrubbed, 'intent')}, trimmed "
        f"{plural(report.attempts_trimmed, 'attempt reply', 'attempt replies')} and "
        f"{plural(report.events_trimmed, 'event payload')}; deleted "
        f"{plural(report.intents_deleted, 'intent')} and "
        f"{plural(report.events_deleted, 'unmatched event')}; cleared "
        f"{plural(report.suppression_notes_cleared, 'suppression note')}; hashed "
        f"{plural(report.audit_targets_hashed, 'audit target')}; in "
        f"{plural(report.batches, 'batch', 'batches')}"
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
    from console.web.extensions import db

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
