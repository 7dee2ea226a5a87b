"""What every engine offers (``Engine``), and why a mark may be refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.store.claims import Claim, ExpiredLease
from console.store.statements import DueIntent, SqlKit

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused
# how the worker judges a lease taken back: from the stage its attempt reached, at `now`
Judge = Callable[[ExpiredLease, dt.datetime], tuple[Classification, Decision]]


class Engine(Protocol):
    """What the send path asks of the database."""

    sql: SqlKit  # how this database spells what the store's shared statements leave open

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a session of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit. The claim, the
        matching of early provider events and what follows a record run here."""

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

    async def sweep(self, now: dt.datetime, judge: Judge) -> list[tuple[ExpiredLease, Decision]]:
        """Take back the leases that ran out before `now` (up to a batch): finish each open
        attempt, so its worker can no longer mark it, then move the intent as `judge` decides
        from the stage the attempt reached; committed. Each lease settled with its decision
        (one another worker holds or settled meanwhile is left as it is)."""

    async def give_back(
        self, returned: Sequence[tuple[Claim, dt.datetime]], now: dt.datetime
    ) -> int:
        """Give back claims that never reached the transport, each due again at the time
        paired with it: ``pending``, its attempt deleted and not counted; committed. How
        many went back (one whose lease was lost stays as it is)."""

    async def beat(self, heartbeat: dict[str, Any]) -> None:
        """Insert or refresh a worker's heartbeat row (``heartbeats.beat_values``), marked
        running; committed."""

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
