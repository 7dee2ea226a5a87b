"""PostgreSQL's send writes, awaited on psycopg's async connection (SQLAlchemy's asyncio
engine on the psycopg driver): while PostgreSQL answers one connection's mark or a
group's record, the event loop goes on with the other sends.

Connections in autocommit mode, kept for a batch: one for each transport connection's
marks (the body of each waits for its own; a mark slow to come back holds back no
other body), one for the records (a group of several in one statement,
``record_arrays``). Each serves one statement at a time; after an error or a
cancellation mid-statement it is discarded, and the next write opens a fresh one.
What follows a record (suppressions, the breaker, alerts) runs on the records'
connection through ``run_sync``, and the claims and housekeeping in sessions of the
same engine (``in_session``): the worker's code is the same on both databases, and no
thread waits on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    async_sessionmaker,
    create_async_engine,
)

from console.store import record_arrays, suppression_lookup
from console.store import send_statements as s
from console.store.send_writes import why_refused

if TYPE_CHECKING:
    from console.worker.outcome_writer import OutcomeWriter
    from console.worker.tick import FinishedAttempt

T = TypeVar("T")
# the claim, a claim ahead and a look for critical intents may each hold one at once
SESSION_CONNECTIONS = 3


def async_engine_for(engine: Engine, connections: int) -> AsyncEngine:
    """An asyncio engine on the database of `engine`, with its connection settings, that
    keeps `connections` open."""
    from console.store.database import engine_options

    url = engine.url.render_as_string(hide_password=False)
    options = engine_options(url)
    options.update(pool_size=connections, max_overflow=2, pool_pre_ping=False)
    return create_async_engine(url, **options)


class _Statement:
    """A statement's SQL text for psycopg, compiled once by SQLAlchemy (its placeholders
    and casts), run on psycopg's own connection and prepared there (``prepare=True``)."""

    def __init__(self, statement: Any, dialect: Any) -> None:
        self._compiled = statement.compile(dialect=dialect)
        self.sql = str(self._compiled)

    def values(self, bound: dict[str, Any]) -> dict[str, Any]:
        """`bound` with the values the statement carries itself (psycopg adapts the rest:
        lists as arrays, aware datetimes as timestamptz)."""
        return self._compiled.construct_params(bound)

    async def run(self, connection: AsyncConnection, bound: dict[str, Any]):
        """Execute on psycopg's AsyncConnection (autocommit) under `connection`; its cursor."""
        driver = connection.sync_connection.connection.driver_connection  # checked out
        return await driver.execute(self.sql, self.values(bound), prepare=True)


class _Autocommit:
    """Autocommit connections of the async engine, each serving one statement at a time:
    up to `most` at once, kept for a batch."""

    def __init__(self, engine: AsyncEngine, most: int) -> None:
        self._engine = engine
        self._most = max(1, most)
        self._idle: list[AsyncConnection] = []
        self._opened = 0
        self._freed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def one(self):
        """A connection for one statement; after an error or a cancellation mid-statement
        it is discarded, never given back to the pool."""
        connection = await self._take()
        try:
            yield connection
        except BaseException:
            self._opened -= 1
            await connection.invalidate()
            raise
        finally:
            if not connection.invalidated:
                self._idle.append(connection)
            async with self._freed:
                self._freed.notify()

    async def _take(self) -> AsyncConnection:
        async with self._freed:
            while not self._idle and self._opened >= self._most:
                await self._freed.wait()
            if self._idle:
                return self._idle.pop()
            self._opened += 1
        try:
            connection = await self._engine.connect()
            return await connection.execution_options(isolation_level="AUTOCOMMIT")
        except BaseException:
            self._opened -= 1
            raise

    async def give_back(self) -> None:
        """Between batches (nothing in flight): every connection back to the pool."""
        idle, self._idle = self._idle, []
        self._opened -= len(idle)
        for connection in idle:
            await connection.close()


class PostgresSendWrites:
    """The marks and records of one worker on PostgreSQL, each awaited."""

    concurrent_claims = True

    def __init__(self, engine: Engine, group_size: int, connections: int) -> None:
        self.group_size = max(1, group_size)
        self._engine = async_engine_for(engine, connections + 1 + SESSION_CONNECTIONS)
        self._sessions = async_sessionmaker(self._engine, expire_on_commit=False)
        dialect = self._engine.dialect
        self._mark = _Statement(s.MARK_DATA_SENT_UNLESS_SUPPRESSED, dialect)
        self._record = _Statement(record_arrays.RECORD_BATCH_IF_MOVED, dialect)
        self._marks = _Autocommit(self._engine, connections)  # one a transport connection
        self._records = _Autocommit(self._engine, 1)  # the records in order

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        forms = suppression_lookup.recipient_forms(recipient)
        values = {"b_id": attempt_id, "b_address": forms[0], "b_address_hash": forms[-1]}
        async with self._marks.one() as connection:
            marked = await self._mark.run(connection, values)
            if marked.rowcount == 1:
                return None
            return await connection.run_sync(why_refused, recipient)

    async def record(
        self, outcomes: Sequence[FinishedAttempt], writer: OutcomeWriter
    ) -> list[bool]:
        records = writer.recordable(outcomes)
        async with self._records.one() as connection:
            recorded = (
                await self._record_all(self._record, connection, records) if records else set()
            )
            return await connection.run_sync(writer.after_all, list(outcomes), recorded)

    @staticmethod
    async def _record_all(
        statement: _Statement, connection: AsyncConnection, records: list[dict[str, Any]]
    ) -> set:
        """Each record whose lease still holds, in one statement; the attempt ids recorded."""
        cursor = await statement.run(connection, record_arrays.as_arrays(records))
        return {attempt_id for (attempt_id,) in await cursor.fetchall()}

    async def in_session(self, work: Callable[..., T], *args: Any) -> T:
        async with self._sessions() as session:
            return await session.run_sync(work, *args)

    async def end_batch(self) -> None:
        await self._marks.give_back()
        await self._records.give_back()

    async def close(self) -> None:
        await self.end_batch()
        await self._engine.dispose()
