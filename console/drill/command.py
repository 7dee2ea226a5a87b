"""``console drill``: the practice drills, run on a scratch database with this deployment's
own configuration, real ``console worker`` processes and a local relay that misbehaves on cue.

The drills (console.drill.drills) each print a line as they end; then a table (or, with
``--json``, one JSON document on stdout) says what each expected and what happened.
The exit status is 1 when any drill fails. With ``--record`` the summary is also
written to the configured database, where the dashboard shows the last one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import time

import click

from console import outbox
from console.cli import StartRefused
from console.config import ConfigError, Settings, load_settings
from console.drill import report
from console.drill.context import DRILL_TIMINGS, LEFT_OUT, DrillContext
from console.drill.drills import DRILLS, NAMES
from console.drill.provider_play import ProviderPlay
from console.drill.relay import DrillRelay
from console.drill.scratch import ScratchRefused, scratch_database
from console.mail.catalog import TemplateCatalog, catalog_for
from console.paths import instance_dir
from console.store.heartbeats import product_version

PRIVATE_WORDS = ("SECRET", "KEY", "PASSWORD", "TOKEN", "DATABASE_URL", "SMTP_URL")


def configuration_digest(environ: dict[str, str], catalog: TemplateCatalog) -> str:
    """A short digest of what the drills depend on: the CONSOLE_* settings (no secrets, no
    addresses of databases or relays) and every template's settings file."""
    digest = hashlib.sha256()
    for name in sorted(environ):
        if name.startswith("CONSOLE_") and not any(w in name for w in PRIVATE_WORDS):
            digest.update(f"{name}={environ[name]}\n".encode())
    for name in catalog.names():
        digest.update(f"[{name}]\n".encode())
        digest.update((catalog.folder(name) / "settings.toml").read_bytes())
    return digest.hexdigest()[:12]


def local_relay(settings: Settings) -> DrillRelay | ProviderPlay:
    """The SMTP relay, or with CONSOLE_TRANSPORT=http the configured provider's API played."""
    if settings.transport == "http":
        return ProviderPlay(settings.provider, settings.mailgun_domain)
    return DrillRelay()


def _about(settings: Settings, catalog: TemplateCatalog, shown_database: str, relay) -> dict:
    replaced: dict[str, str] = {}
    relay.environment(replaced)
    transport = settings.transport
    if transport == "http":
        transport += f" ({relay.provider}'s API, played locally)"
    return {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "version": product_version(),
        "configuration": configuration_digest(dict(os.environ), catalog),
        "database": shown_database,
        "transport": transport,
        "timings": {k.removeprefix("CONSOLE_").lower(): v for k, v in DRILL_TIMINGS.items()},
        "left_out": [k for k in LEFT_OUT if os.environ.get(k) and k not in replaced],
    }


def _run(drill, ctx: DrillContext, say) -> list[report.Result]:
    started = time.monotonic()
    results = []
    try:
        for result in drill.run(ctx):
            say(report.progress_line(result))
            results.append(result)
    except Exception as error:  # noqa: BLE001 - a drill that breaks is a failed drill, said so
        result = report.Result(drill.name, "-", drill.what, f"the drill stopped: "
                               f"{type(error).__name__}: {error}", False,
                               time.monotonic() - started)  # fmt: skip
        say(report.progress_line(result))
        results.append(result)
    return results


def run_drills(settings: Settings, names: tuple[str, ...], database: str | None, say):
    """Run the drills named on a scratch database; return (about, results)."""
    catalog = catalog_for(settings)
    try:
        with scratch_database(database, settings.secret_key) as (url, folder):
            from console.store.schema_check import shown_url

            scratch = dataclasses.replace(settings, database_url=url)
            outbox.configure(scratch)
            results: list[report.Result] = []
            with local_relay(settings) as relay:
                shown = shown_url(url) if database else "scratch SQLite"
                about = _about(settings, catalog, shown, relay)
                ctx = DrillContext(url, folder, relay, scratch, catalog)
                try:
                    for drill in DRILLS:
                        if drill.name in names:
                            results += _run(drill, ctx, say)
                finally:
                    ctx.close()
    except ScratchRefused as error:
        raise StartRefused(str(error)) from None
    return about, results


@click.command("drill")
@click.option(
    "--only", type=click.Choice(NAMES), multiple=True,
    help="Run this drill alone (repeat it for several).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for CI).")
@click.option("--record", is_flag=True, help="Keep the summary in the configured database.")
@click.option(
    "--database", default=None,
    help="An empty database for the drill (URL). [default: a scratch SQLite file]",
)  # fmt: skip
def drill_command(only: tuple[str, ...], as_json: bool, record: bool, database: str | None) -> None:
    """Run the practice drills on a scratch database with this deployment's configuration.

    Real workers, a local relay that misbehaves on cue; no mail leaves this machine and
    the configured database's mail is never touched. Exit status 1 when a drill fails.
    """
    try:  # the configured database is not opened (nor, by default, created) for the drills
        scratch = {"CONSOLE_DATABASE_URL": "sqlite://"}
        settings = load_settings(instance_path=instance_dir(), overrides=scratch)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None

    record_url = None
    if record:
        from console.drill.record import record_target

        record_url = record_target()

    def say(line: str) -> None:
        click.echo(line, err=as_json)

    names = only or NAMES
    about, results = run_drills(settings, names, database, say)
    if as_json:
        click.echo(json.dumps(report.document(results, about), indent=2))
    else:
        click.echo("")
        click.echo(report.table(results))
        timings = ", ".join(f"{k} {v}" for k, v in about["timings"].items())
        click.echo(f"scratch run timings (not the deployment's): {timings}")
    if record_url is not None:
        from console.drill.record import record_run

        run_id = record_run(record_url, about, results)
        click.echo(f"recorded as drill run {run_id}", err=as_json)
    if any(r.failed for r in results):
        raise SystemExit(1)
