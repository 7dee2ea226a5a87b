"""The engine on SQLite: every statement in the event loop's thread, on SQLAlchemy.

SQLite is a file in this process: a write is local work, not a round trip, and a thread
would only contend for the GIL with the event loop. The claim (``sqlite_claim``), the
sweep, the give-back, the heartbeat and the writes an outcome calls for run in a
``Session``, on the store's steps (``console.store.claims``, ``send_guards``,
``send_budget``...); the
marks and records on one connection kept for the batch, their statements compiled once
and run on the driver's cursor (``sqlite_prepared.Prepared``).
Each mark is committed alone, before its body; the records waiting together are written
in one transaction (``record_batches``): each commit writes the pages it changed to the
log, and consecutive records change the same index pages.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from console.core.breaker import BreakerState
from console.core.domain_backoff import Deferral
from console.core.lifecycle import Decision
from console.engine.base import SUPPRESSED, SWEPT, Judge, T
from console.engine.record_batches import RecordBatches
from console.engine.sqlite_claim import SQL, SqliteClaimSteps, claim_transaction
from console.engine.sqlite_prepared import commit, prepared
from console.store import (
    alerts,
    claims,
    heartbeats,
    records,
    send_budget,
    send_guards,
    suppressions,
)
from console.store import statements as s
from console.store.claims import Claim, ExpiredLease
from console.store.database import make_session_factory


class SqliteEngine:
    """``Engine`` on SQLite: sessions for the claim, one writer connection for the marks
    and records, all in the event loop's thread."""

    def __init__(self, database: Engine, connections: int = 1) -> None:
        self._database = database
        self._sessions = make_session_factory(database)
        self._connection: Connection | None = None
        self._records = RecordBatches(self._record_batch, size=connections)

    def claiming(self) -> AbstractAsyncContextManager[SqliteClaimSteps]:
        return claim_transaction(self._sessions)

    async def in_session(self, work: Callable[[Session], T]) -> T:
        with self._sessions() as session:
            return work(session)

    async def sweep(self, now: dt.datetime, judge: Judge) -> list[tuple[ExpiredLease, Decision]]:
        with self._sessions() as session:
            rows = session.execute(claims.expired_leases(now)).all()  # one writer: no lock
            leases = claims.finish_silent_attempts(session, rows, now)
            settled = claims.settle_expired_leases(session, leases, judge, now)
            session.commit()
            return settled

    async def beat(self, heartbeat: dict[str, Any]) -> None:
        self._committed(lambda session: session.execute(heartbeats.BEAT, heartbeat))

    async def give_back(
        self, returned: Sequence[tuple[Claim, dt.datetime]], now: dt.datetime
    ) -> int:
        return self._committed(lambda session: claims.release(session, returned, now))

    async def read_breakers(self) -> dict[str, BreakerState]:
        with self._sessions() as session:
            return send_guards.read_breakers(session)

    async def move_breaker(
        self,
        lane: str,
        seen: BreakerState,
        new: BreakerState,
        now: dt.datetime,
        owner: str | None = None,
    ) -> bool:
        return self._committed(
            lambda session: send_guards.write_breaker_state(
                session, SQL, lane, seen, new, now, owner
            )
        )

    async def defer_domain(self, deferral: Deferral, code: int | None, now: dt.datetime) -> int:
        return self._committed(
            lambda session: send_guards.defer_domain(session, SQL, deferral, code, now)
        )

    async def halve_rate(self, now: float) -> bool:
        return self._committed(
            lambda session: send_budget.halve_rate(session.connection(), SQL, now)
        )

    async def suppress_refused_mailbox(
        self, recipient: str, reply: str, attempt_id: int, now: dt.datetime
    ) -> bool:
        return self._committed(
            lambda session: suppressions.suppress_refused_mailbox(
                session.connection(),
                recipient=recipient,
                reply=reply,
                attempt_id=attempt_id,
                now=now,
            )
        )

    async def fire_alert(
        self, key: str, summary: str, details: dict[str, Any], now: dt.datetime
    ) -> bool:
        return self._committed(
            lambda session: alerts.mark_alert_firing(session, key, summary, details, now)
        )

    async def hold_refused(
        self, claim: Claim, due_at: dt.datetime, reason: str, now: dt.datetime
    ) -> bool:
        return self._committed(
            lambda session: records.release_refused(
                session.connection(), claim, now, due_at, reason
            )
        )

    def _committed(self, write: Callable[[Session], T]) -> T:
        """What `write` returns, run in a session of its own and committed."""
        with self._sessions() as session:
            written = write(session)
            session.commit()
            return written

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        connection = self._writer()
        try:
            forms = suppressions.recipient_forms(recipient)
            values = {"b_id": attempt_id, "b_address": forms[0], "b_address_hash": forms[-1]}
            mark = prepared(s.MARK_DATA_SENT_UNLESS_SUPPRESSED, connection.dialect)
            marked = mark.execute(connection, values).rowcount == 1
            commit(connection)
            if marked:
                return None
            return SUPPRESSED if suppressions.is_suppressed_now(connection, recipient) else SWEPT
        except BaseException:
            self._close()
            raise

    async def record(self, values: dict[str, Any]) -> bool:
        return await self._records.record(values)

    async def _record_batch(self, batch: list[dict[str, Any]]) -> list[bool]:
        """The records of `batch` in one transaction; whether each was recorded."""
        connection = self._writer()
        try:
            recorded = [_record(connection, values) for values in batch]
            commit(connection)
            return recorded
        except BaseException:
            self._close()  # rolls back the batch: each of its callers gets the error
            raise

    async def forget_connections(self) -> None:
        self._close()

    async def release(self) -> None:
        self._close()

    async def close(self) -> None:
        self._close()

    def _writer(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._database.connect()
        return self._connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()  # rolls back what it held
            self._connection = None


def _record(connection: Connection, values: dict[str, Any]) -> bool:
    """Move the intent only while this lease holds it, then finish its attempt (the caller
    commits). False for a stale worker: nothing changed."""
    dialect = connection.dialect
    moved = prepared(s.MOVE_LEASED_INTENT, dialect).execute(connection, values).rowcount
    if moved:
        prepared(s.RECORD_ATTEMPT, dialect).execute(connection, values)
    return bool(moved)
