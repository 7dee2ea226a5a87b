"""The send store on PostgreSQL: every statement awaited on psycopg's own async connections,
the event loop sending meanwhile.

The claim, the give-back and the housekeeping run through SQLAlchemy's asyncio engine on
psycopg's async connection (``in_transaction``): their steps are written against a
``Session`` (so is the application's eligibility check), and ``AsyncSession.run_sync``
runs them as they are, each statement awaited rather than blocking the loop. The marks
and records, a few statements a message, skip the engine's layers:

one ``psycopg.AsyncConnection`` in autocommit mode (one statement, one commit).
psycopg reads its socket when it is readable, runs one statement at a time on it
(``AsyncConnection.lock``) and prepares each statement on first use (``prepare=True``).
The SQL is SQLAlchemy's own compilation of the Core statements, with its bind
processors applied (``statements.Prepared``); psycopg adapts the values, lists as arrays.

A statement has a deadline (``STATEMENT_SECONDS``): past it psycopg cancels the statement
in the server and the send fails before its body. A mark whose sender was cancelled may
still have committed; its attempt then only looks sent (ambiguous), never the other way
round. After an error the connection is closed and the next write opens a fresh one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import Engine, String, any_, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

from console.store import statements as s
from console.store import suppressions
from console.store.database import CONNECT_TIMEOUT_SECONDS, read_json
from console.store.send_store import SUPPRESSED, SWEPT, T

# How long a mark or a record may take before it is cancelled and fails.
STATEMENT_SECONDS = 30.0
# Why a mark changed nothing: the recipient (either form) is on the list, or the sweep
# finished the attempt.
SUPPRESSED_NOW = (
    select(s.SUPPRESSION.c.id)
    .where(s.SUPPRESSION.c.recipient == any_(bindparam("b_forms", type_=ARRAY(String))))
    .limit(1)
)


class PostgresSendStore:
    """``SendStore`` on PostgreSQL: transactions on the asyncio engine's pool, marks and
    records on one async connection of their own."""

    def __init__(self, engine: Engine, connections: int = 1) -> None:
        self._engine = engine
        self._writer = AsyncWriter(engine, connections)
        self._async_engine = asyncio_engine(engine)
        self._sessions = async_sessionmaker(self._async_engine, expire_on_commit=False)
        dialect = engine.dialect
        self._mark = s.prepared(s.MARK_DATA_SENT_UNLESS_SUPPRESSED, dialect)
        self._record_one = s.prepared(s.RECORD_IF_MOVED, dialect)
        self._suppressed_now = s.prepared(SUPPRESSED_NOW, dialect)

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        async with self._sessions() as session:
            return await session.run_sync(work)

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        forms = suppressions.recipient_forms(recipient)
        values = {"b_id": attempt_id, "b_address": forms[0], "b_address_hash": forms[-1]}
        marked, _ = await self._writer.run(self._mark, values, "data_sent mark")
        if marked == 1:
            return None
        _, found = await self._writer.run(self._suppressed_now, {"b_forms": forms}, "lookup")
        return SUPPRESSED if found else SWEPT

    async def record(self, values: dict[str, Any]) -> bool:
        _, recorded = await self._writer.run(self._record_one, values, "record")
        return bool(recorded)

    async def forget_connections(self) -> None:
        await self._writer.forget()

    async def release(self) -> None:
        """Between batches: the connections stay open for the next batch."""

    async def close(self) -> None:
        await self._writer.forget()
        await self._async_engine.dispose()


class AsyncWriter:
    """Up to `size` psycopg ``AsyncConnection`` (autocommit) for the marks and records: a
    statement runs on an idle one, or on one opened for it while fewer than `size` are
    open, or waits for one to come back; each within ``STATEMENT_SECONDS``. Far from the
    database, each send's mark then waits for its own round trip, not behind the others'
    marks and records. A connection that fails is closed; the next statement opens a
    fresh one."""

    def __init__(self, engine: Engine, size: int = 1) -> None:
        self._engine = engine
        self._size = max(1, size)
        self._idle: list[psycopg.AsyncConnection] = []
        self._busy: set[psycopg.AsyncConnection] = set()
        self._retired: set[psycopg.AsyncConnection] = set()  # closed when they come back
        self._opening = 0
        self._changed = asyncio.Condition()

    async def run(
        self, prepared: s.Prepared, values: dict[str, Any], label: str
    ) -> tuple[int, list[tuple]]:
        """Run `prepared` with `values`, the statement committed: its row count and rows;
        an error as SQLAlchemy's (`label` names the statement), its connection closed."""
        try:
            connection = await self._take()
        except (psycopg.Error, OSError, TimeoutError) as error:
            raise _as_sqlalchemy_error(label, error) from error
        try:
            async with asyncio.timeout(STATEMENT_SECONDS):
                cursor = await connection.execute(
                    prepared.sql, prepared.parameters(values), prepare=True
                )
                rows = await cursor.fetchall() if cursor.description else []
        except BaseException as error:  # cancelled too: its state is not known
            await self._give_back(connection, broken=True)
            if isinstance(error, psycopg.Error | OSError | TimeoutError):
                raise _as_sqlalchemy_error(label, error) from error
            raise
        await self._give_back(connection)
        return cursor.rowcount, rows

    @property
    def is_open(self) -> bool:
        return bool(self._idle or self._busy)

    async def _take(self) -> psycopg.AsyncConnection:
        async with self._changed:
            while not self._idle and len(self._busy) + self._opening >= self._size:
                await self._changed.wait()
            if self._idle:
                connection = self._idle.pop()
                self._busy.add(connection)
                return connection
            self._opening += 1
        try:
            connection = await psycopg.AsyncConnection.connect(
                **connect_arguments(self._engine), autocommit=True
            )
        finally:
            async with self._changed:
                self._opening -= 1
                self._changed.notify()
        self._busy.add(connection)
        return connection

    async def _give_back(self, connection: psycopg.AsyncConnection, broken=False) -> None:
        self._busy.discard(connection)
        if broken or connection.closed or connection in self._retired:
            self._retired.discard(connection)
            await connection.close()
        else:
            self._idle.append(connection)
        async with self._changed:
            self._changed.notify()

    async def forget(self) -> None:
        """Close every idle connection now and each busy one when its statement ends;
        the next statements open fresh ones."""
        idle, self._idle = self._idle, []
        self._retired |= self._busy
        for connection in idle:
            await connection.close()


def connect_arguments(engine: Engine) -> dict[str, Any]:
    """What `engine` connects with (host, database, user, its options), as psycopg takes it."""
    _, arguments = engine.dialect.create_connect_args(engine.url)
    arguments.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    return arguments


def asyncio_engine(engine: Engine) -> AsyncEngine:
    """SQLAlchemy's asyncio engine on the database of `engine`, connecting as it does."""
    arguments = connect_arguments(engine)
    return create_async_engine(
        engine.url.set(drivername="postgresql+psycopg"),
        async_creator=lambda: psycopg.AsyncConnection.connect(**arguments),
        pool_pre_ping=True,
        pool_size=2,  # the tick's transaction and a look for critical mail
        max_overflow=2,  # what follows the records
        hide_parameters=True,
        json_deserializer=read_json,
    )


def _as_sqlalchemy_error(label: str, error: Exception) -> DBAPIError:
    """The driver's error as SQLAlchemy raises it (the worker's handlers know those)."""
    if not isinstance(error, psycopg.Error):
        error = psycopg.OperationalError(f"{label}: {error or type(error).__name__}")
    return DBAPIError.instance(label, None, error, psycopg.Error, hide_parameters=True)
