"""A ``console drill`` context in the test's own process: one drill run directly, on a
scratch SQLite database, against a relay the test chose (one that misbehaves on cue)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from console.config import load_settings
from console.drill.context import DrillContext
from console.drill.relay import DrillRelay
from console.drill.scratch import scratch_database
from console.mail.catalog import catalog_for


@contextlib.contextmanager
def scratch_drill(instance_path: Path, relay: DrillRelay) -> Iterator[DrillContext]:
    """A drill context on a scratch SQLite database with `relay` started; all gone after."""
    variables = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "drill" * 8}
    settings = load_settings({}, instance_path=instance_path, overrides=variables)
    with scratch_database(None, settings.secret_key) as (url, folder), relay:
        scratch = dataclasses.replace(settings, database_url=url)
        ctx = DrillContext(url, folder, relay, scratch, catalog_for(settings))
        try:
            yield ctx
        finally:
            ctx.close()
