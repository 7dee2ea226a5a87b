"""Start-up's look at the database: can it be reached, and is its schema the one the code needs?

``serve``, ``worker`` and ``demo`` ask before they start anything; the answer is one line saying
what is wrong and what to do (``DatabaseNotReady``). A schema newer than the code (a revision
this code does not know) passes: during a rolling upgrade the old processes keep running beside
the new schema.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from console.core.setting_values import normalized_database_url
from console.paths import MIGRATIONS_DIR
from console.store.database import make_engine

UPGRADE_COMMAND = "console db upgrade"
VERSION_TABLE = "alembic_version"  # where Alembic records the revision


class DatabaseNotReady(Exception):
    """The database cannot serve this code yet; the message says why and what to do."""


# The newest migration's revision, so that a database already there is let through without
# Alembic, whose import is a good part of a process's start (tests/unit/test_schema_revision.py
# keeps it equal to Alembic's head).
SCHEMA_REVISION = "0019"


@functools.cache
def _scripts() -> Any:
    from alembic.script import ScriptDirectory  # only when a database is not at the head

    return ScriptDirectory(str(MIGRATIONS_DIR))


def head_revision() -> str:
    """The revision the code needs: the newest migration."""
    return _scripts().get_current_head()


def is_behind(revision: str | None) -> bool:
    """Whether a database at `revision` (None: no schema) lacks migrations the code has."""
    if revision == SCHEMA_REVISION:
        return False
    if revision is None:
        return True
    from alembic.util import CommandError

    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:  # unknown here: a newer code's migration
        return False


def shown_url(url: str) -> str:
    """`url` as a message may show it: the password hidden."""
    return make_url(normalized_database_url(url)).render_as_string(hide_password=True)


def current_revision(connection: Connection) -> str | None:
    """The revision recorded in the database (None: never migrated)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def _reason(error: DBAPIError) -> str:
    """The driver's message on one line, each of its lines a punctuated sentence."""
    lines = [" ".join(line.split()) for line in str(error.orig or error).splitlines()]
    lines = [line for line in lines if line]
    ended = [line if line[-1] in ".?!:;," else line + "." for line in lines[:-1]]
    return " ".join(ended + lines[-1:])


@contextlib.contextmanager
def connected(url: str) -> Iterator[Connection]:
    """A connection to `url`; DatabaseNotReady, saying what failed, when none can be made."""
    engine = make_engine(url)
    try:
        try:
            connection = engine.connect()
        except DBAPIError as error:
            raise DatabaseNotReady(
                f"cannot connect to the database at {shown_url(url)} ({_reason(error)}): "
                "check CONSOLE_DATABASE_URL and that the database is running"
            ) from None
        with connection:
            yield connection
    finally:
        engine.dispose()


def behind_message(url: str, revision: str | None) -> str:
    """The line that says the schema at `url` is missing or behind, and what to run."""
    state = "has no schema" if revision is None else f"is at revision {revision}"
    return (
        f"the database at {shown_url(url)} {state}, the code needs {head_revision()}: "
        f'run "{UPGRADE_COMMAND}"'
    )


def check_database(url: str) -> None:
    """Raise DatabaseNotReady unless `url` answers with a schema this code can run on."""
    with connected(url) as connection:
        revision = current_revision(connection)
    if is_behind(revision):
        raise DatabaseNotReady(behind_message(url, revision))
