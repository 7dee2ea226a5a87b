"""The send path's database work behind one interface, one implementation a database.

The database is chosen once (``engine_for``); the worker then only calls what an
``Engine`` offers, and nothing else on the send path asks which database it is on.
``sqlite`` works in the event loop's thread (SQLite is a file: no round trip to wait
for); ``postgres`` awaits psycopg's own async connections, so the other sends go on while
PostgreSQL answers.

Both keep the same promises: the claim locks due intents so that no two workers lease
one; the mark commits before it returns and is refused when the recipient is suppressed
or the attempt was swept; each record is a compare-and-set on its intent's lease token,
so a stale worker changes nothing.

The claim's steps take the ``Session`` of a transaction the engine opens
(``in_transaction``): the application's eligibility checks take one too. The shared
steps (closing unsent intents, giving claims back, settling a swept lease) are in
``console.store.claims``; the steps whose SQL differs are the engine's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy import Engine as DatabaseEngine
from sqlalchemy.orm import Session

from console.store.claims import Claim, ExpiredLease
from console.store.statements import DueIntent

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused


class Engine(Protocol):
    """What the send path asks of the database."""

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a session of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit. The claim, the
        give-back, the housekeeping and what follows a record run here."""

    def lock_due(
        self, session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        """Lock up to `limit` due intents, at most `limits[lane]` a lane, critical first,
        each lane's retries before its first attempts; no other worker gets them."""

    def suppressed_among(self, session: Session, recipients: set[str]) -> set[str]:
        """Those of `recipients` (lowercase) on the suppression list, as such or hashed."""

    def lease(
        self,
        session: Session,
        due: Sequence[DueIntent],
        now: dt.datetime,
        lease_expires_at: dt.datetime,
        worker_id: str,
    ) -> list[Claim]:
        """Give each of `due` a fresh lease token and one new attempt row."""

    def take_expired_leases(self, session: Session, now: dt.datetime) -> list[ExpiredLease]:
        """Intents still ``sending`` after their lease ran out (up to a batch), their open
        attempts finished first, so their worker can no longer mark them."""

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


def engine_for(database: DatabaseEngine, connections: int = 1) -> Engine:
    """The engine of `database`; `connections`: the most its marks and records may use at
    once on PostgreSQL (SQLite writes on one connection)."""
    if database.dialect.name == "postgresql":
        from console.engine.postgres import PostgresEngine  # psycopg: only here

        return PostgresEngine(database, connections)
    from console.engine.sqlite import SqliteEngine

    return SqliteEngine(database)
