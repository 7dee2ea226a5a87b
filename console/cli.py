"""The ``console`` command: a Flask CLI group around the app factory, and its commands.

``serve`` (web console with the embedded worker), ``worker`` (the send loop
alone), ``db`` (console/commands/db.py), ``user`` (commands/user.py), ``prune``, ``forget``,
``hold``, ``release``, ``holds`` (commands/hold.py), ``demo`` and ``drill``
(console/drill/); nothing of Flask's own (``run``, ``shell``, ``--app``, ``--env-file``...). Each
command reads the settings the app was built with and hands them on: nothing
below this module reaches for Flask's ``current_app``. ``worker`` builds no app:
it reads the settings itself (console.commands.worker), so it starts sooner.
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
from console.paths import warn_if_process_key

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
    from console.words.refusals import said

    try:
        check(url)
    except DatabaseNotReady as error:
        raise StartRefused(said(error)) from None


class ConsoleGroup(FlaskGroup):
    """Flask's command group with the product's commands only, imported when run (or listed).

    ``console worker`` then starts without importing the web app or its extensions;
    Flask's options and commands, and those of installed Flask plugins, are left out.
    """

    LAZY_COMMANDS = {
        "db": "console.commands.db:db_cli",
        "demo": "console.demo.command:demo_command",
        "drill": "console.drill.command:drill_command",
        "user": "console.commands.user:user_cli",
        "hold": "console.commands.hold:hold_command",
        "release": "console.commands.hold:release_command",
        "holds": "console.commands.hold:holds_command",
    }
    FLASK_OPTIONS = ("env_file", "app", "debug")

    def __init__(self, **extra) -> None:
        super().__init__(
            add_default_commands=False,
            add_version_option=False,
            load_dotenv=False,
            set_debug_flag=False,
            **extra,
        )
        self.params = [param for param in self.params if param.name not in self.FLASK_OPTIONS]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return click.Group.parse_args(self, ctx, args)  # not Flask's early --app/--env-file

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name in self.LAZY_COMMANDS:
            module_name, attribute = self.LAZY_COMMANDS[name].split(":")
            return getattr(importlib.import_module(module_name), attribute)
        return None


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from console.store.heartbeats import product_version

    click.echo(f"console {product_version()}")
    ctx.exit()


@click.group(cls=ConsoleGroup, create_app=_create_app)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """Operator console and worker for transactional email.

    Settings are CONSOLE_* environment variables: CONSOLE_DATABASE_URL (default:
    SQLite under instance/), CONSOLE_SMTP_URL (the relay), CONSOLE_SECRET_KEY (the
    session signing key) and more; docs/configuration.md lists every one.
    """


@main.command("worker")
def worker_command() -> None:
    """Send queued mail until SIGTERM or SIGINT, then record what is in flight and exit.

    It sends the mail queued in CONSOLE_DATABASE_URL through CONSOLE_SMTP_URL (or the
    HTTP provider CONSOLE_TRANSPORT=http names); any number may share one database.
    """
    from console.commands.worker import main as worker_main

    worker_main()


class _StopSignal:
    """SIGTERM's and SIGINT's handler for `console serve`, set before anything starts: while
    serve starts up, a stop is noted (the start-up finishes, then everything stops in order);
    once the web server's loop runs, it ends the loop as Ctrl-C does (waitress finishes the
    requests in flight)."""

    def __init__(self) -> None:
        self.requested = False
        self.serving = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True
        if self.serving:
            raise KeyboardInterrupt

    def serve(self, server) -> None:
        """Run `server`'s loop unless a stop came during the start-up."""
        self.serving = True  # first: a signal from here on ends the loop
        if not self.requested:
            server.run()


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5000, show_default=True, type=int, help="Port to listen on.")
@with_appcontext
def serve_command(host: str, port: int) -> None:
    """Serve the console (waitress) with the send loop running in the same process.

    Both use the database CONSOLE_DATABASE_URL names; the send loop sends through
    CONSOLE_SMTP_URL (or the HTTP provider CONSOLE_TRANSPORT=http names).
    """
    import waitress

    from console.engine import pg_wakeup
    from console.ops.jobs.schedule import start_ops_jobs
    from console.web.ops import SCHEDULER_EXTENSION
    from console.web.request_size import largest_body_bytes
    from console.words.refusals import listen_refused
    from console.worker.running import start_embedded_worker

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    settings = _settings()
    check_database(settings.database_url)
    warn_if_process_key(settings.secret_key)
    stop = _StopSignal()
    signal.signal(signal.SIGTERM, stop)  # before the embedded worker ticks
    signal.signal(signal.SIGINT, stop)
    # waitress drops X-Forwarded-* unless told; the app's ProxyFix reads CONSOLE_TRUSTED_PROXIES
    keep_forwarded = {"clear_untrusted_proxy_headers": False} if settings.trusted_proxies else {}
    most = largest_body_bytes(settings)  # waitress stops reading a body no route would read
    try:  # the port first: one that cannot be listened on starts nothing
        server = waitress.create_server(
            app, host=host, port=port, max_request_body_size=most, **keep_forwarded
        )
    except OSError as error:
        raise click.ClickException(listen_refused("console", host, port, error, "--port")) from None
    embedded = start_embedded_worker(settings)
    app.extensions[SCHEDULER_EXTENSION] = embedded  # read by /healthz
    listener = pg_wakeup.listener_for(settings.database_url)  # wakes `embedded` via wakeup
    jobs = start_ops_jobs(settings)

    try:
        click.echo(f"console on http://{host}:{server.effective_port} (embedded worker running)")
        stop.serve(server)  # returns on SIGINT or SIGTERM, once the requests in flight are served
    except KeyboardInterrupt:
        # the signal came before waitress's loop, which catches it from then on: a stop all the same
        log.info("stopped before the web server's loop began")
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
    from console.ops.jobs.retention import prune
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
    from console.web import erasure_words
    from console.web.extensions import db
    from console.words.refusals import said

    try:
        report = erasure.forget(
            db.session, address, actor=f"cli:{getpass.getuser()}", reason=reason,
            secret_key=_settings().secret_key, cancel=cancel,
        )  # fmt: skip
        db.session.commit()
    except ActionRefused as exc:
        db.session.rollback()
        raise click.ClickException(said(exc)) from None
    click.echo(erasure_words.summary(report))
