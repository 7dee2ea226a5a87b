"""Start-up's look at the database: can it be reached, and is its schema the one the code needs?

``serve``, ``worker`` and ``demo`` ask before they start anything; the answer is a
``DatabaseNotReady`` whose reason and facts say what is wrong (its sentence, in
``console/words/refusals.py``, also says what to do). A schema newer than the code (a revision
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
from console.words.refusals import Refusal

VERSION_TABLE = "alembic_version"  # where Alembic records the revision


class DatabaseNotReady(Refusal):
    """The database cannot serve this code yet: `reason` and its facts say why."""


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


@contextlib.contextmanager
def connected(url: str) -> Iterator[Connection]:
    """A connection to `url`; DatabaseNotReady, saying what failed, when none can be made."""
    engine = make_engine(url)
    try:
        try:
            connection = engine.connect()
        except DBAPIError as error:
            problem = str(error.orig or error)
            raise DatabaseNotReady(
                "database_unreachable", url=shown_url(url), problem=problem
            ) from None
        with connection:
            yield connection
    finally:
        engine.dispose()


def behind(url: str, revision: str | None) -> DatabaseNotReady:
    """The refusal that says the schema at `url` is missing (`revision` None) or behind."""
    return DatabaseNotReady(
        "schema_behind", url=shown_url(url), revision=revision, needs=head_revision()
    )


def check_database(url: str) -> None:
    """Raise DatabaseNotReady unless `url` answers with a schema this code can run on."""
    with connected(url) as connection:
        revision = current_revision(connection)
    if is_behind(revision):
        raise behind(url, revision)
