"""``console demo``: the whole product on this machine, with demo mail in every state.

Its own SQLite database, ``instance/demo.db``, never the one ``console serve`` uses;
``--database`` or CONSOLE_DATABASE_URL may name another, which it takes only if it made
it, marked it as its own before or finds it at the code's schema without an
application's rows (console.demo.seed): any other refuses the start in one line,
exit status 2, nothing written. Then a local SMTP capture server that misbehaves for
some addresses (console.demo.smtp_capture), demo business events and their history
(console.demo.history), a webhook secret with a signed ``curl`` to paste, logins
printed on the terminal, and ``console serve`` (the web console with its embedded
worker). Below the banner the terminal stays quiet: the worker's warnings in a
readable form and one line a minute of activity (console.demo.activity), while a
bounded demo traffic queues a few case notices. Running it again reuses the database.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import click
import flask_migrate
from flask import Flask
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from console import logs
from console.app import create_app
from console.cli import StartRefused
from console.config import Settings
from console.demo import history, provider_shapes, seed
from console.demo.activity import Activity
from console.demo.seed import suppress_once
from console.demo.smtp_capture import CapturedMessage, DemoSMTPServer
from console.demo.staged import STAGED, StagedLines
from console.demo.traffic import TRAFFIC_CASES, TRAFFIC_SECONDS, DemoTraffic
from console.models import utcnow
from console.outbox import enqueue
from console.paths import instance_dir
from console.store import schema_check
from console.store.accounts import put_user
from console.web.extensions import db
from console.words.refusals import listen_refused

# Quick retries so the demo shows retried, pending and dead mail within minutes;
# an environment variable of the same name wins.
DEMO_SETTINGS = {
    "CONSOLE_RETRY_BASE_SECONDS": "2",
    "CONSOLE_RETRY_CAP_SECONDS": "60",
    "CONSOLE_RETRY_FLOOR_SECONDS": "1",
    "CONSOLE_MAX_ATTEMPTS": "6",
    "CONSOLE_POLL_SECONDS": "1",
    "CONSOLE_SMTP_TIMEOUT_SECONDS": "5",
}
TERMINAL_LOG_LEVEL = "WARNING"  # the terminal shows warnings, not every decision
DEMO_DATABASE_FILE = "demo.db"  # in instance/, beside the console.db that `serve` uses
DEMO_USERS = (("operator", "operator"), ("admin", "admin"), ("support", "viewer"))
SUPPRESSED_ADDRESS = "complained@example.com"


def _order(number: int, name: str, total: str) -> dict:
    return {
        "customer_name": name,
        "order_number": str(number),
        "items": [{"quantity": 1, "name": "Desk lamp", "price": total}],
        "total": total,
    }


# key, event, recipient, template, params; what the capture server does decides the outcome.
# Misbehaving addresses have domains of their own: a run of 4yz defers a whole domain.
DEMO_EVENTS = [
    ("order:1001:confirmation", "order:1001", "ada@example.com", "order-confirmation",
     _order(1001, "Ada", "39.00")),
    ("order:1002:confirmation", "order:1002", "grace@example.com", "order-confirmation",
     _order(1002, "Grace", "12.50")),
    ("order:1003:confirmation", "order:1003", "flaky.buyer@example.org", "order-confirmation",
     _order(1003, "Flaky", "8.00")),
    ("order:1004:confirmation", "order:1004", "reject.nobody@example.com", "order-confirmation",
     _order(1004, "Nobody", "99.00")),
    ("order:1005:confirmation", "order:1005", "hangup.maybe@example.com", "order-confirmation",
     _order(1005, "Maybe", "45.00")),
    ("order:1006:confirmation", "order:1006", SUPPRESSED_ADDRESS, "order-confirmation",
     _order(1006, "Complainer", "5.00")),
    ("user:17:welcome", "user:17:signup", "tempfail.mailbox@example.net", "welcome",
     {"name": "Tempfail", "login_url": "https://shop.example.com/login"}),
    ("user:18:welcome", "user:18:signup", "linus@example.com", "welcome",
     {"name": "Linus", "login_url": "https://shop.example.com/login"}),
    ("user:18:password-reset:1", "user:18:password-reset", "linus@example.com", "password-reset",
     {"name": "Linus", "reset_url": "https://shop.example.com/reset/abc"}),
    ("user:19:login:1", "user:19:login", "flaky.login@example.org", "login-code",
     {"code": "314159"}),
]  # fmt: skip
# created two days ago: past the maximum age, so a temporary failure makes it dead
OLD_EVENTS = [
    ("order:997:confirmation", "order:997", "tempfail.old@example.net", "order-confirmation",
     _order(997, "Late", "20.00")),
]  # fmt: skip


def default_database_url() -> str:
    return f"sqlite:///{instance_dir() / DEMO_DATABASE_FILE}"


def demo_database_url(option: str | None, environ: Mapping[str, str]) -> str:
    """The demo's database: `--database`, else CONSOLE_DATABASE_URL, else instance/demo.db."""
    if option or environ.get("CONSOLE_DATABASE_URL"):
        return option or environ["CONSOLE_DATABASE_URL"]
    return default_database_url()


def _made_here(url: str) -> bool:
    """Whether the database at `url` is the demo's to make: its own file, or a new one."""
    if url == default_database_url():
        return True
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return False
    path = Path(parsed.database)
    return path.parent.is_dir() and not path.exists()


def not_the_demos(url: str) -> str | None:
    """Why the demo may not write into the database at `url`; None when it may."""
    if _made_here(url):
        return None
    with schema_check.connected(url) as connection:
        if seed.bears_demo_mark(connection):
            return None
        if seed.holds_application_rows(connection):
            return (
                f"the database at {schema_check.shown_url(url)} holds accounts or mail "
                "that console demo did not create: give it an empty database, or unset "
                "CONSOLE_DATABASE_URL and --database for instance/demo.db"
            )
        revision = schema_check.current_revision(connection)
        if schema_check.is_behind(revision):
            return str(schema_check.behind(url, revision))
    return None


def claim_database(url: str) -> None:
    """Refuse to start (StartRefused) on a database that is not the demo's own to write."""
    try:
        refusal = not_the_demos(url)
    except schema_check.DatabaseNotReady as error:
        refusal = str(error)
    if refusal is not None:
        raise StartRefused(refusal)


def demo_app(smtp_url: str, database_url: str, *, webhook_secret: str) -> Flask:
    """The console on the demo's database, with the demo's quick retries and webhook secret."""
    settings = {name: os.environ.get(name) or value for name, value in DEMO_SETTINGS.items()}
    # a key of its own: no session of the demo is valid on the console `serve` runs
    secret_key = os.environ.get("CONSOLE_SECRET_KEY") or secrets.token_hex(32)
    return create_app(
        {
            **settings,
            "CONSOLE_SMTP_URL": smtp_url,
            "CONSOLE_DATABASE_URL": database_url,
            "CONSOLE_SECRET_KEY": secret_key,
            "CONSOLE_WEBHOOK_SECRET": webhook_secret,
        }
    )


def terminal_logging(settings: Settings, stream: IO[str] | None = None) -> None:
    """Log readable lines to the terminal, warnings only unless CONSOLE_LOG_LEVEL says."""
    level = settings.log_level if os.environ.get("CONSOLE_LOG_LEVEL") else TERMINAL_LOG_LEVEL
    hidden = logs.settings_secrets(settings)
    handler = logs.configure_logging(secrets=hidden, level=level, readable=True, stream=stream)
    handler.addFilter(StagedLines(logging.getLogger().level))


def reset_demo_logins(session: Session) -> list[tuple[str, str, str]]:
    """Create the demo accounts, or give them fresh passwords; return (name, role, password)."""
    logins = []
    for username, role in DEMO_USERS:
        password = secrets.token_urlsafe(12)
        put_user(session, username, password, role)
        logins.append((username, role, password))
    return logins


def seed_demo_events(session: Session) -> str:
    """Enqueue the demo's business events; each key only once, however often this runs.

    Return the Message-ID of order 1002's confirmation (the printed webhook reports it).
    """
    note = "marked the demo mail as spam"
    suppress_once(session, SUPPRESSED_ADDRESS, reason="complaint", note=note, now=utcnow())
    message_ids = {}
    for key, event, to, template, params in DEMO_EVENTS:
        intent = enqueue(session, key=key, event=event, to=to, template=template, params=params)
        message_ids[key] = intent.message_id
    started = utcnow()
    for key, event, to, template, params in OLD_EVENTS:
        intent = enqueue(session, key=key, event=event, to=to, template=template, params=params)
        if intent.created_at >= started:
            intent.created_at = started - dt.timedelta(days=2)
    return message_ids["order:1002:confirmation"]


def seed_demo(session: Session) -> tuple[str, list[tuple[str, str, str]]]:
    """Mark the database as the demo's, reset the logins, seed the mail, its history and the
    providers' reports; commit. Return the curl's Message-ID and the logins."""
    seed.mark_as_demo(session, utcnow())
    logins = reset_demo_logins(session)
    curl_message_id = seed_demo_events(session)
    history.seed_history(session)
    reported = provider_shapes.sent_mail(session, history.PROVIDER_REPORTED_KEYS)
    provider_shapes.seed_provider_shapes(session, reported)
    session.commit()
    return curl_message_id, logins


def _banner(
    host: str, port: int, smtp: DemoSMTPServer, app: Flask, logins, curl_message_id: str
) -> None:
    lines = [
        "",
        "Outbox console demo",
        f"  console        http://{host}:{port}",
    ]
    for username, role, password in logins:
        lines.append(f"  log in         {username} / {password}   ({role})")
    lines += [
        f"  SMTP capture   {smtp.url}: addresses starting with tempfail (451), flaky",
        "                 (451 once), reject (550) or hangup (no reply) misbehave",
        f"  database       {app.config['SQLALCHEMY_DATABASE_URI']} (the demo's own)",
        "  webhook        /webhooks/generic is signed with the demo's secret; to report a",
        "                 delivery of order 1002, paste (needs curl and openssl):",
        "  "
        + history.webhook_curl(
            f"http://{host}:{port}",
            app.extensions["console.settings"].webhook_secret,
            curl_message_id,
            "grace@example.com",
        ),
        f"  staged         {STAGED}",
        f"  demo traffic   a case notice (event case:N:assignment:1) every "
        f"{TRAFFIC_SECONDS:g} s, {TRAFFIC_CASES} in all",
        "  below          the worker's warnings, and a line a minute of what happened",
        "  stop with Ctrl+C",
        "",
    ]
    click.echo("\n".join(lines))


def check_console_port(host: str, port: int) -> None:
    """Refuse early (ClickException) when the console's port cannot be listened on.

    It binds the way the web server will (SO_REUSEADDR), so only a port that
    something else listens on, or an address this machine lacks, is refused.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.create_server((host, port), family=family).close()
    except OSError as error:
        raise click.ClickException(listen_refused("console", host, port, error, "--port")) from None


def start_capture_server(
    port: int, on_message: Callable[[CapturedMessage], None] | None = None
) -> DemoSMTPServer:
    """Start the SMTP capture server; ClickException when its port is taken."""
    try:
        return DemoSMTPServer(port, on_message=on_message).start()
    except OSError as error:
        refusal = listen_refused("SMTP capture", "127.0.0.1", port, error, "--smtp-port")
        raise click.ClickException(refusal) from None


@click.command("demo")
@click.option("--host", default="127.0.0.1", show_default=True, help="Console address.")
@click.option("--port", default=5000, show_default=True, type=int, help="Console port.")
@click.option("--smtp-port", default=2525, show_default=True, type=int, help="Capture port.")
@click.option(
    "--database",
    default=None,
    help="The demo's database URL. [default: CONSOLE_DATABASE_URL, else instance/demo.db]",
)
@click.pass_context
def demo_command(
    ctx: click.Context, host: str, port: int, smtp_port: int, database: str | None
) -> None:
    """Run the console with demo mail, a local SMTP capture server and an embedded worker."""
    check_console_port(host, port)
    database_url = demo_database_url(database, os.environ)
    claim_database(database_url)
    activity = Activity(click.echo)
    smtp = start_capture_server(smtp_port, on_message=activity.captured)
    try:
        if database_url == default_database_url():
            instance_dir().mkdir(parents=True, exist_ok=True)
        webhook_secret = os.environ.get("CONSOLE_WEBHOOK_SECRET") or secrets.token_hex(16)
        app = demo_app(smtp.url, database_url, webhook_secret=webhook_secret)
        terminal_logging(app.extensions["console.settings"])
        with app.app_context():
            flask_migrate.upgrade()
            curl_message_id, logins = seed_demo(db.session)
        _banner(host, port, smtp, app, logins, curl_message_id)
        traffic = DemoTraffic(app, on_assigned=activity.traffic).start()
        activity.start()
        try:
            with app.app_context():
                from console.cli import serve_command

                # a port taken between the check and the web server's bind: serve refuses it
                ctx.invoke(serve_command, host=host, port=port)
        finally:
            traffic.stop()
            activity.stop()
    finally:
        smtp.stop()
