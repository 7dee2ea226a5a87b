"""The send store on SQLite: the claim's and the housekeeping's transactions, the mark and
the records, all in the event loop's thread; the marks and records on one connection kept
for the batch.

SQLite is a file in this process: a write is local work, not a round trip, and a thread
would only contend for the GIL with the event loop. The worker posts each record while the
sender waits for the relay's next reply, so the record fills that wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from console.store import records, suppressions
from console.store.database import make_session_factory
from console.store.send_store import SUPPRESSED, SWEPT, T


class SqliteSendStore:
    """``SendStore`` on SQLite: one writer connection, in the event loop's thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = make_session_factory(engine)
        self._connection: Connection | None = None

    def _writer(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = records.writer(self._engine)
        return self._connection

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        with self._sessions() as session:
            return work(session)

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        connection = self._writer()
        try:
            forms = suppressions.recipient_forms(recipient)
            marked = records.mark_data_sent_unless_suppressed(connection, attempt_id, forms)
            if marked:
                return None
            return SUPPRESSED if suppressions.is_suppressed_now(connection, recipient) else SWEPT
        except BaseException:
            self._close()
            raise

    async def record(self, values: dict[str, Any]) -> bool:
        connection = self._writer()
        try:
            return records.record_by_values(connection, values)
        except BaseException:
            self._close()
            raise

    async def forget_connections(self) -> None:
        self._close()

    async def release(self) -> None:
        self._close()

    async def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()  # rolls back what it held
            self._connection = None
