"""What every engine offers (``Engine``), and why a mark may be refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from console.store.claims import Claim, ExpiredLease
from console.store.statements import DueIntent, SqlKit

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused


class Engine(Protocol):
    """What the send path asks of the database."""

    sql: SqlKit  # how this database spells what the store's shared statements leave open

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a session of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit. The claim, the
        give-back, the housekeeping and what follows a record run here."""

    def lock_due(
        self, session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        """Lock up to `limit` due intents, at most `limits[lane]` a lane, critical first,
        each lane's retries before its first attempts; no other worker gets them."""

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
