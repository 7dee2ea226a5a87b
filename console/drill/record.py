"""``console drill --record``: the run's summary kept in the configured database."""

from __future__ import annotations

import datetime as dt

import click

from console.cli import StartRefused
from console.config import ConfigError, load_settings
from console.drill.report import Result
from console.paths import instance_dir
from console.store import database, schema_check
from console.store.drill_runs import add_run


def record_target() -> str:
    """The configured database, checked before the drills run: at the code's schema."""
    try:
        settings = load_settings(instance_path=instance_dir())
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    try:
        schema_check.check_database(settings.database_url)
    except schema_check.DatabaseNotReady as error:
        raise StartRefused(f"--record: {error}") from None
    return settings.database_url


def record_run(url: str, about: dict, results: list[Result]) -> int:
    """Write the summary to the database at `url`; return its id."""
    engine = database.make_engine(url)
    try:
        with database.make_session_factory(engine)() as session:
            run = add_run(
                session,
                ran_at=dt.datetime.fromisoformat(about["when"]),
                version=about["version"],
                configuration=about["configuration"],
                database=about["database"],
                results=[result.as_dict() for result in results],
            )
            session.commit()
            return run.id
    finally:
        engine.dispose()
