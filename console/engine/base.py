"""What every engine offers (``Engine``), and why a mark may be refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from console.core.breaker import BreakerState
from console.core.domain_backoff import Deferral
from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.token_bucket import BucketPolicy
from console.store.claims import Claim, ExpiredLease
from console.store.statements import DueIntent

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused
# how the worker judges a lease taken back: from the stage its attempt reached, at `now`
Judge = Callable[[ExpiredLease, dt.datetime], tuple[Classification, Decision]]


class ClaimSteps(Protocol):
    """The steps of one claim (T1), all in the transaction of ``Engine.claiming``."""

    async def read_breakers(self) -> dict[str, BreakerState]:
        """Every lane's breaker as stored (closed for a lane with no row yet)."""

    async def move_breaker(
        self, lane: str, seen: BreakerState, new: BreakerState, now: dt.datetime, owner: str
    ) -> bool:
        """Take a lane's probe: store `new` only if `lane` still holds `seen`."""

    async def critical_due(self, now: dt.datetime) -> bool:
        """Whether a critical intent is due at `now`, as ``lock_due`` would find it."""

    async def lock_budget(self, now: float) -> None:
        """Make concurrent claims take turns on the send budget until this one commits."""

    async def take_tokens(self, policy: BucketPolicy, now: float, want: int) -> tuple[int, float]:
        """Take up to `want` tokens of the shared bucket: how many, and how many are left."""

    async def sent_since(self, since: float) -> int:
        """Messages counted from the hour holding `since` on (``send_budget.sent_since``)."""

    async def settle_budget(
        self, policy: BucketPolicy | None, unused: int, now: float, leased: int
    ) -> None:
        """Give back `unused` tokens (with a rate) and count `leased` at `now` (always)."""

    async def lock_due(
        self, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        """Lock up to `limit` due intents, at most `limits[lane]` a lane, critical first,
        each lane's retries before its first attempts; no other worker gets them."""

    async def suppressed_among(self, recipients: set[str]) -> set[str]:
        """Those of `recipients` (lowercase) on the suppression list, as such or hashed."""

    async def check(self, work: Callable[[Session], T]) -> T:
        """Run the application's eligibility check `work` on a ``Session``."""

    async def close_unsent(
        self, not_sent: Sequence[tuple[DueIntent, Decision]], now: dt.datetime
    ) -> None:
        """Move intents that must not be sent now to their decided status (no attempt)."""

    async def lease(
        self,
        due: Sequence[DueIntent],
        now: dt.datetime,
        lease_expires_at: dt.datetime,
        worker_id: str,
    ) -> list[Claim]:
        """Give each of `due` a fresh lease token and one new attempt row."""


class Engine(Protocol):
    """What the send path asks of the database."""

    def claiming(self) -> AbstractAsyncContextManager[ClaimSteps]:
        """One claim's transaction: its steps, committed when the block ends (rolled back
        on an error)."""

    async def in_session(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a ``Session`` of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit. The matching of early
        provider events runs here."""

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

    async def read_breakers(self) -> dict[str, BreakerState]:
        """Every lane's breaker as stored (closed for a lane with no row yet)."""

    async def move_breaker(
        self,
        lane: str,
        seen: BreakerState,
        new: BreakerState,
        now: dt.datetime,
        owner: str | None = None,
    ) -> bool:
        """Store `new` for `lane` only if it still holds `seen` (compare-and-set: another
        worker may have moved it first); committed. Whether this call moved it."""

    async def defer_domain(self, deferral: Deferral, code: int | None, now: dt.datetime) -> int:
        """Store the domain's deferral for every worker (one stored already that ends later
        keeps its end; those over by `now` deleted) and move the domain's pending intents
        due before its end to its end; committed. How many intents moved."""

    async def halve_rate(self, now: float) -> bool:
        """The provider throttled a send: halve the shared rate, at most once a second;
        committed. Whether this call halved it."""

    async def suppress_refused_mailbox(
        self, recipient: str, reply: str, attempt_id: int, now: dt.datetime
    ) -> bool:
        """Put a mailbox the relay called unknown in `reply` on the list, naming the
        attempt; committed. False when it was there already."""

    async def fire_alert(
        self, key: str, summary: str, details: dict[str, Any], now: dt.datetime
    ) -> bool:
        """Mark condition `key` firing unless it fires already; committed. Whether this
        call fired it."""

    async def hold_refused(
        self, claim: Claim, due_at: dt.datetime, reason: str, now: dt.datetime
    ) -> bool:
        """The relay refused the session: the intent waits, ``pending`` until `due_at`,
        uncharged (its attempt deleted), saying why; only while this lease holds it;
        committed. False for a lost lease: nothing changed."""

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
