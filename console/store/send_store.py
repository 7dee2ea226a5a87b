"""The send loop's database work behind one interface, whatever the database: the claim's and
the housekeeping's transactions, the ``data_sent`` mark and the records of finished attempts.

The database is chosen once (``send_store_for``); the worker then only awaits what a
``SendStore`` offers. ``send_store_sqlite`` works in the event loop's thread (SQLite is a
file: no round trip to wait for). ``send_store_postgres`` awaits psycopg's own async
connection, so the other sends go on while PostgreSQL answers.

Both keep the same promises: the mark commits before it returns and is refused when the
recipient is suppressed or the attempt was swept; each record is a compare-and-set on its
intent's lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused


class SendStore(Protocol):
    """What the send loop asks of the database: its transactions, the marks, the records."""

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a session of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit; it connects when
        `work` first uses it. The claim, the give-back, the housekeeping and what follows
        the records run here (their steps, and the application's eligibility checks,
        take a ``Session``)."""

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        """Commit that the body of `attempt_id` is about to leave: None; or, nothing marked,
        why not (``SUPPRESSED``: the recipient is on the list; ``SWEPT``: the lease was
        taken back)."""

    async def record(self, values: dict[str, Any]) -> bool:
        """Record one outcome (``records.record_values``) only while its lease holds;
        committed on return. False when the lease was lost: nothing changed."""

    async def forget_connections(self) -> None:
        """After an error: the next write starts on fresh connections."""

    async def release(self) -> None:
        """Between batches: give back what the pool lends."""

    async def close(self) -> None:
        """The worker stops: close every connection."""


def send_store_for(engine: Engine, connections: int = 1) -> SendStore:
    """The send store of `engine`'s database; `connections`: the most its marks and
    records may use at once on PostgreSQL (SQLite writes on one connection)."""
    if engine.dialect.name == "postgresql":
        from console.store.send_store_postgres import PostgresSendStore  # psycopg: only here

        return PostgresSendStore(engine, connections)
    from console.store.send_store_sqlite import SqliteSendStore

    return SqliteSendStore(engine)
