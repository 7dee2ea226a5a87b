"""Engines and sessions outside Flask, and the connection settings of both databases.

Every engine hides its bound parameters (recipients, payloads, reasons) from the messages of its
errors, so a failed statement never writes personal data to a log. The console's own engine also
waits only briefly for a lock (``lock_timeout_seconds``): a busy database then answers a request
with 503 in seconds instead of holding a thread for half a minute. The worker keeps the long
wait: its records must land.

Nothing here belongs to one table; it is what every query stands on. Every engine decodes its
JSON columns with ``console.store.json_values.read_json``; ``console.store.schema_check`` is the
start-up check.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from console.core.setting_values import normalized_database_url
from console.paths import create_private_file
from console.store.json_values import read_json

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
