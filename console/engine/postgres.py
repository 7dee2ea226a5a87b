"""The engine on PostgreSQL: every statement awaited, the event loop sending meanwhile.

Every statement of the send path runs on a connection of one
``psycopg_pool.AsyncConnectionPool`` of psycopg's async connections, as plain SQL
(``postgres_sql``): the claim (``postgres_claim``, one transaction), the marks and records
(a statement a message each), the sweep, the give-back, the heartbeat and what follows a
record (``postgres_follow_ups``). A statement alone runs on a connection in autocommit
(one statement, one commit); several records, a claim, a sweep or a give-back in a
transaction. Up to two connections a sender (its mark, and its last record written while
its next email goes), so far from the database a mark waits for its own round trip, not
behind the others'. psycopg prepares a statement on a connection once it has run there a
few times, and adapts the values.

Two pieces of work take the store's ``Session`` instead (``in_session``): the
application's eligibility check (its signature) and the matching of early provider
events (the webhook's own rules). Each runs in a thread on a session of its own, so the
event loop goes on meanwhile.

A statement has a deadline (``STATEMENT_SECONDS``): past it the send fails before its
body. A mark whose sender was cancelled may still have committed; its attempt then only
looks sent (ambiguous), never the other way round. After an error the pool is closed and
the next write opens a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import psycopg
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.engine import postgres_sql as q
from console.engine.base import SUPPRESSED, SWEPT, Judge, T
from console.engine.postgres_claim import PostgresClaimSteps
from console.engine.postgres_follow_ups import PostgresFollowUps
from console.engine.record_batches import RecordBatches
from console.store import suppressions
from console.store.claims import SWEEP_BATCH_SIZE, Claim, ExpiredLease
from console.store.database import CONNECT_TIMEOUT_SECONDS, make_session_factory, read_json
from console.store.statements import ERROR_TEXT_LIMIT, DueIntent, clip
from console.vocabulary import CLAIMED

# How long a mark or a record may take before it is cancelled and fails.
STATEMENT_SECONDS = 30.0
# connections beyond the senders': the tick's claim and housekeeping, a look for critical
# mail, and what follows the records
TRANSACTIONS = 4
_TIMES = ("b_now", "b_next_attempt_at", "b_submitted_at")


class PostgresEngine(PostgresFollowUps):
    """``Engine`` on PostgreSQL: one pool of psycopg's async connections for the claim
    (``PostgresClaimSteps``), the marks, the records and what follows them
    (``PostgresFollowUps``)."""

    def __init__(self, engine: Engine, connections: int = 1) -> None:
        self._connect_arguments = connect_arguments(engine)
        self._size = max(1, connections)
        self._pool: AsyncConnectionPool | None = None
        self._records = RecordBatches(self._record_batch, size=self._size)
        self._sessions = make_session_factory(engine)

    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[PostgresClaimSteps]:
        async with self._transaction("claim") as connection:
            yield PostgresClaimSteps(connection, self.in_session)

    async def in_session(self, work: Callable[[Session], T]) -> T:
        return await asyncio.to_thread(self._in_own_session, work)

    def _in_own_session(self, work: Callable[[Session], T]) -> T:
        with self._sessions() as session:
            return work(session)

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        forms = suppressions.recipient_forms(recipient)
        values = {"b_id": attempt_id, "b_address": forms[0], "b_address_hash": forms[-1]}
        marked, _ = await self._run(q.MARK_DATA_SENT_UNLESS_SUPPRESSED, values, "data_sent mark")
        if marked == 1:
            return None
        _, found = await self._run(q.SUPPRESSED_NOW, {"b_forms": forms}, "lookup")
        return SUPPRESSED if found else SWEPT

    async def record(self, values: dict[str, Any]) -> bool:
        return await self._records.record(_in_utc(values))

    async def _record_batch(self, batch: list[dict[str, Any]]) -> list[bool]:
        """The records of `batch`: one alone as its own statement, several in one
        transaction sent together (psycopg's ``executemany``, in pipeline mode, costs
        more than a plain statement for one); whether each was recorded."""
        if len(batch) == 1:
            _, recorded = await self._run(q.RECORD_IF_MOVED, batch[0], "record")
            return [bool(recorded)]
        async with self._transaction("records") as connection:
            return await _each_returned_a_row(connection, q.RECORD_IF_MOVED, batch)

    async def sweep(self, now: dt.datetime, judge: Judge) -> list[tuple[ExpiredLease, Decision]]:
        values = {"b_now": now, "b_limit": SWEEP_BATCH_SIZE}
        async with self._transaction("sweep") as connection:
            rows = await (await connection.execute(q.EXPIRED_LEASES, values)).fetchall()
            settled = []
            for row in rows:
                lease = await _finish_silent_attempt(connection, row, now)
                if lease is None:  # finished meanwhile: its record came first
                    continue
                classification, decision = judge(lease, now)
                if await _settle(connection, lease, classification, decision, now):
                    settled.append((lease, decision))
            return settled

    async def beat(self, heartbeat: dict[str, Any]) -> None:
        await self._run(q.BEAT, _in_utc(heartbeat, ("started_at", "last_tick_at")), "heartbeat")

    async def give_back(
        self, returned: Sequence[tuple[Claim, dt.datetime]], now: dt.datetime
    ) -> int:
        if not returned:
            return 0
        values = [
            _in_utc(
                dict(
                    b_id=claim.intent.id,
                    b_token=claim.lease_token,
                    b_attempt_id=claim.attempt_id,
                    b_due_at=due_at,
                    b_now=now,
                    b_reason=None,
                ),
                ("b_due_at", "b_now"),
            )
            for claim, due_at in returned
        ]
        async with self._transaction("give-back") as connection:
            return sum(await _each_returned_a_row(connection, q.GIVE_BACK, values))

    async def forget_connections(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def release(self) -> None:
        """Between batches: the pool keeps its connections for the next batch."""

    async def close(self) -> None:
        await self.forget_connections()

    async def _run(self, sql: str, values: dict[str, Any], label: str) -> tuple[int, list]:
        """Run `sql` with `values` on a connection of the pool, committed: its row count and
        rows; an error as SQLAlchemy's (`label` names the statement)."""
        try:
            async with asyncio.timeout(STATEMENT_SECONDS):
                pool = await self._opened_pool()
                async with pool.connection() as connection:
                    cursor = await connection.execute(sql, values)
                    rows = await cursor.fetchall() if cursor.description else []
                    return cursor.rowcount, rows
        except (psycopg.Error, OSError, TimeoutError) as error:
            raise _as_sqlalchemy_error(label, error) from error

    @contextlib.asynccontextmanager
    async def _transaction(self, label: str) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection of the pool in a transaction, committed when the block ends (rolled
        back on an error); an error as SQLAlchemy's (`label` names the work)."""
        try:
            async with asyncio.timeout(STATEMENT_SECONDS):
                pool = await self._opened_pool()
                async with pool.connection() as connection:
                    async with connection.transaction():
                        yield connection
        except (psycopg.Error, OSError, TimeoutError) as error:
            raise _as_sqlalchemy_error(label, error) from error

    async def _opened_pool(self) -> AsyncConnectionPool:
        if self._pool is None:
            pool = AsyncConnectionPool(
                kwargs=self._connect_arguments,
                min_size=0,
                max_size=self._size + TRANSACTIONS,
                open=False,
                configure=_configure,
            )
            await pool.open()
            self._pool = pool
        return self._pool


def _in_utc(values: dict[str, Any], names: Sequence[str] = _TIMES) -> dict[str, Any]:
    """`values` with each timestamp of `names` timezone-aware (a naive one is UTC already)."""
    times = {
        name: values[name].replace(tzinfo=dt.UTC)
        for name in names
        if values.get(name) is not None and values[name].tzinfo is None
    }
    return {**values, **times} if times else values


async def _each_returned_a_row(
    connection: psycopg.AsyncConnection, sql: str, batch: Sequence[dict[str, Any]]
) -> list[bool]:
    """Run `sql` once for each values of `batch`, sent together (``executemany``); whether
    each returned a row."""
    cursor = connection.cursor()
    await cursor.executemany(sql, batch, returning=True)
    return [bool(await each.fetchall()) async for each in cursor.results()]


async def _finish_silent_attempt(
    connection: psycopg.AsyncConnection, row: Sequence[Any], now: dt.datetime
) -> ExpiredLease | None:
    """The lease of `row` (``EXPIRED_LEASES``), its open attempt finished; None when the
    attempt was finished already."""
    intent, lease_token, attempt_id = DueIntent.from_row(row), row[-2], row[-1]
    if attempt_id is None:
        return ExpiredLease(intent, lease_token, None, CLAIMED)
    values = {"b_id": attempt_id, "b_now": now}
    finished = await (await connection.execute(q.FINISH_SILENT_ATTEMPT, values)).fetchone()
    return None if finished is None else ExpiredLease(intent, lease_token, attempt_id, finished[0])


async def _settle(
    connection: psycopg.AsyncConnection,
    lease: ExpiredLease,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> bool:
    """Move the intent of `lease` as decided, if no one else did meanwhile."""
    values = dict(
        b_id=lease.intent.id,
        b_token=lease.lease_token,
        b_status=decision.status,
        b_reason=clip(decision.reason, ERROR_TEXT_LIMIT),
        b_now=now,
        b_next_attempt_at=decision.next_attempt_at,
        b_attempt_id=lease.attempt_id,
        b_outcome=classification.outcome,
        b_error=clip(classification.reason, ERROR_TEXT_LIMIT),
    )
    values = _in_utc(values, ("b_now", "b_next_attempt_at"))
    return bool(await (await connection.execute(q.SETTLE_EXPIRED_LEASE, values)).fetchall())


async def _configure(connection: psycopg.AsyncConnection) -> None:
    """A new connection of the pool: in autocommit (a statement alone is its own
    transaction; ``connection.transaction()`` sends BEGIN and COMMIT), and JSON read as
    SQLAlchemy's sessions read it (``read_json``: a value nested too deep is an
    ``UnreadableJSON`` the worker fails alone)."""
    await connection.set_autocommit(True)
    set_json_loads(read_json, connection)


def connect_arguments(engine: Engine) -> dict[str, Any]:
    """What `engine` connects with (host, database, user, its options), as psycopg takes it."""
    _, arguments = engine.dialect.create_connect_args(engine.url)
    arguments.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    return arguments


def _as_sqlalchemy_error(label: str, error: Exception) -> DBAPIError:
    """The driver's error as SQLAlchemy raises it (the worker's handlers know those)."""
    if not isinstance(error, psycopg.Error):
        error = psycopg.OperationalError(f"{label}: {error or type(error).__name__}")
    return DBAPIError.instance(label, None, error, psycopg.Error, hide_parameters=True)
