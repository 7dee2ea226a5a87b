"""The drill's scratch database: a SQLite file in a temporary folder, or an empty one named.

A database named with ``--database`` is taken only when it holds none of an
application's rows (``console.demo.seed``) or bears the drill's mark, a one-row
table of its own (``console_drill``) written the first time; any other is refused
in one line, nothing written. The configured database (CONSOLE_DATABASE_URL) is
never opened.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import flask_migrate
from sqlalchemy import Column, MetaData, Table, insert, inspect, select
from sqlalchemy.engine import make_url

from console.demo import seed
from console.model_columns import UTCDateTime
from console.models import utcnow
from console.store import database, schema_check

DRILL_MARK = Table("console_drill", MetaData(), Column("made_at", UTCDateTime, nullable=False))
SCRATCH_FILE = "drill.db"


class ScratchRefused(Exception):
    """The named database is not the drill's to write: the message says why, in one line."""


def not_the_drills(url: str) -> str | None:
    """Why the drill may not write into the database at `url`; None when it may."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        return "the drill needs a database its worker processes can share, not :memory:"
    try:
        with schema_check.connected(url) as connection:
            if inspect(connection).has_table(DRILL_MARK.name):
                return None
            if seed.holds_application_rows(connection):
                return (
                    f"the database at {schema_check.shown_url(url)} holds accounts or mail that "
                    "console drill did not create: give it an empty database, or leave out "
                    "--database for a scratch SQLite file"
                )
    except schema_check.DatabaseNotReady as error:
        return str(error)
    return None


def prepare(url: str, secret_key: str) -> None:
    """Bring the database at `url` to the code's schema and mark it as the drill's own."""
    from console.app import create_app

    app = create_app({"CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": secret_key})
    with app.app_context():
        flask_migrate.upgrade()
        from console.web.extensions import db

        db.engine.dispose()
    engine = database.make_engine(url)
    try:
        with engine.begin() as connection:
            DRILL_MARK.create(connection, checkfirst=True)
            if connection.execute(select(DRILL_MARK.c.made_at).limit(1)).first() is None:
                connection.execute(insert(DRILL_MARK).values(made_at=utcnow()))
    finally:
        engine.dispose()


@contextlib.contextmanager
def scratch_database(option: str | None, secret_key: str) -> Iterator[tuple[str, Path]]:
    """Yield (the database URL, a temporary folder for the workers' logs).

    Without `option` the database is a SQLite file in that folder, gone afterwards.
    """
    with tempfile.TemporaryDirectory(prefix="console-drill-") as folder:
        url = option or f"sqlite:///{Path(folder) / SCRATCH_FILE}"
        if option:
            refusal = not_the_drills(url)
            if refusal is not None:
                raise ScratchRefused(refusal)
        prepare(url, secret_key)
        yield url, Path(folder)
