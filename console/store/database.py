"""The database itself: engines and sessions, the start-up check, and how JSON values are read.

Nothing here belongs to one table; it is what every query stands on. Every engine hides
its bound parameters (recipients, payloads, reasons) from the messages of its errors and
decodes its JSON columns so that one unreadable value never breaks the read of the rows
around it. ``serve``, ``worker`` and ``demo`` ask the start-up check before they start
anything: can the database be reached, and is its schema the one the code needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from console.core.setting_values import normalized_database_url
from console.paths import MIGRATIONS_DIR, create_private_file

# Engines and sessions ----------------------------------------------------------------------------
#
# Engines and sessions outside Flask, and the connection settings of both databases.
#
# Every engine hides its bound parameters (recipients, payloads, reasons) from the messages of its
# errors, so a failed statement never writes personal data to a log. The console's own engine also
# waits only briefly for a lock (``lock_timeout_seconds``): a busy database then answers a request
# with 503 in seconds instead of holding a thread for half a minute. The worker keeps the long
# wait: its records must land.

SQLITE_BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_SECONDS = 10


@event.listens_for(Engine, "connect")
def _configure_sqlite(dbapi_connection: Any, connection_record: Any) -> None:
    """Use WAL, a busy timeout and enforced foreign keys on every SQLite connection."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def create_private_sqlite_file(url: str) -> None:
    """Create the file of a SQLite `url` with mode 0600 before SQLite creates it 0644."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    if parsed.database.startswith("file:"):
        return  # a URI filename: SQLite opens it as asked
    path = Path(parsed.database)
    if path.parent.is_dir() and not path.exists():
        create_private_file(path)


def engine_options(url: str, *, lock_timeout_seconds: float | None = None) -> dict[str, Any]:
    """Return create_engine keyword arguments suited to the database in `url`.

    `lock_timeout_seconds` bounds how long a statement waits for another
    transaction's lock (None: SQLite's 30 s busy timeout, PostgreSQL's none). A
    PostgreSQL server that does not answer fails the connection after
    CONNECT_TIMEOUT_SECONDS.
    """
    if url.startswith("sqlite"):
        timeout = lock_timeout_seconds or SQLITE_BUSY_TIMEOUT_MS / 1000
        return {
            "connect_args": {"timeout": timeout},
            "hide_parameters": True,
            "json_deserializer": read_json,
        }
    connect_args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_SECONDS}
    options: dict[str, Any] = {"pool_pre_ping": True, "pool_size": 5, "max_overflow": 5}
    if lock_timeout_seconds is not None:
        connect_args["options"] = f"-c lock_timeout={round(lock_timeout_seconds * 1000)}"
        options["pool_timeout"] = lock_timeout_seconds
    return {
        **options,
        "connect_args": connect_args,
        "hide_parameters": True,
        "json_deserializer": read_json,
    }


def bound_lock_waits(engine: Engine, lock_timeout_seconds: float | None) -> None:
    """Make each SQLite connection of `engine` wait at most `lock_timeout_seconds` for a lock.

    (The busy timeout every SQLite connection gets is set first; this one follows it.)
    """
    if engine.dialect.name != "sqlite" or lock_timeout_seconds is None:
        return
    milliseconds = round(lock_timeout_seconds * 1000)

    @event.listens_for(engine, "connect")
    def _short_busy_timeout(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={milliseconds}")
        cursor.close()


def make_engine(url: str, *, lock_timeout_seconds: float | None = None) -> Engine:
    """Create an engine for `url` with the product's connection settings."""
    url = normalized_database_url(url)
    create_private_sqlite_file(url)
    engine = create_engine(url, **engine_options(url, lock_timeout_seconds=lock_timeout_seconds))
    bound_lock_waits(engine, lock_timeout_seconds)
    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return a session factory whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


# Start-up check ----------------------------------------------------------------------------------
#
# Start-up's look at the database: can it be reached, and is its schema the one the code needs?
#
# ``serve``, ``worker`` and ``demo`` ask before they start anything; the answer is one line saying
# what is wrong and what to do (``DatabaseNotReady``). A schema newer than the code (a revision
# this code does not know) passes: during a rolling upgrade the old processes keep running beside
# the new schema.

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


# JSON values -------------------------------------------------------------------------------------
#
# JSON columns read so that one unreadable value never breaks the read of the rows around it.
#
# Every engine decodes its JSON columns with ``read_json`` (SQLAlchemy's ``json_deserializer``,
# which psycopg uses for PostgreSQL's ``json`` too). A value that is not JSON, or is nested deeper
# than ``MAX_DEPTH``, comes back as an ``UnreadableJSON`` naming the problem instead of raising in
# the middle of a batch; whoever uses the value decides what that row's failure is.

MAX_DEPTH = 64  # arrays and objects inside each other; no template needs more
PREVIEW_CHARACTERS = 200


@dataclasses.dataclass(frozen=True)
class UnreadableJSON:
    """A stored JSON value that could not be decoded: why, and the start of its text."""

    problem: str
    preview: str

    def __bool__(self) -> bool:
        return True  # never mistaken for an empty value (`params or {}`)


def read_json(raw: str | bytes) -> Any:
    """Decode `raw`; an UnreadableJSON when it is not JSON or is nested too deep."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    try:
        value = json.loads(raw)
    except RecursionError:
        return UnreadableJSON(f"nested deeper than {MAX_DEPTH} levels", raw[:PREVIEW_CHARACTERS])
    except ValueError as error:
        return UnreadableJSON(f"not JSON ({error})", raw[:PREVIEW_CHARACTERS])
    if _depth_exceeds(value, MAX_DEPTH):
        return UnreadableJSON(f"nested deeper than {MAX_DEPTH} levels", raw[:PREVIEW_CHARACTERS])
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` holds containers more than `limit` deep (walked without recursion)."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return any(isinstance(item, dict | list) for item in level)


def params_problem(params: Any) -> str | None:
    """Why an intent's stored params cannot be rendered, or None when they can."""
    if params is None or isinstance(params, dict):
        return None
    if isinstance(params, UnreadableJSON):
        return f"params unreadable: {params.problem}"
    return f"params must be a JSON object, found {_json_kind(params)}"


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "true/false", int: "a number"}
    return kinds.get(type(value), "a number" if isinstance(value, float) else "another value")
