"""T1 and what comes before it: the housekeeping, the provider's limits, the claim.

``housekeeping`` beats, takes back the leases of silent workers (settling each as
decided) and matches provider events that came before their id; at every tick.

``SendBudget``: the shared send rate and the rolling daily quota. Before the engine's
``lock_due`` the claim asks ``lane_limits`` how many intents each lane may take (tokens
from the shared bucket, what the quota leaves); after the lease ``settle`` gives back
the tokens not used. With neither limit configured there is no budget and the claim
runs no statement for it. A throttling reply calls ``throttled``: the shared rate halves.

``BatchClaimer``: the protections' limits, a bounded batch locked, screened (expiry,
suppression, eligibility), leased; one commit. Each step is awaited in the engine's
claim transaction (``Engine.claiming``): on PostgreSQL the sends in flight go on meanwhile.

``CriticalCheck``: a claim takes the critical lane first, but a login code enqueued
while a batch is sent would wait for that batch to end; so every ``CHECK_EVERY``
emails taken from a batch with more waiting, the worker looks for due critical
intents (one read) and claims them (the breakers read, the critical lane only) to send
next. A look that fails is logged and the batch goes on. Not with a send budget (its
tokens are taken by the tick's claim, in order).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
import os
import secrets
import socket
from collections.abc import Callable, Mapping

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from console.config import Settings
from console.core.lifecycle import Decision
from console.core.token_bucket import BucketPolicy, DailyQuota, bulk_allowance
from console.engine import Engine
from console.engine.base import ClaimSteps
from console.store import claims, heartbeats
from console.store.claims import Claim, ExpiredLease
from console.store.provider_events import match_unmatched_events
from console.store.statements import DueIntent
from console.vocabulary import CRITICAL, LANES
from console.worker.decisions import SendDecisions, WorkerSettings
from console.worker.guard import SendGuard

log = logging.getLogger("console.worker.loop")


DAY = 24 * 3600  # seconds


@dataclasses.dataclass
class Granted:
    """What one claim took: tokens (None: no rate), and whether bulk's quota is spent."""

    tokens: int | None = None
    quota_reached: bool = False

    def batch_limit(self, batch_size: int) -> int:
        """How many intents the claim may lock in all."""
        return batch_size if self.tokens is None else min(batch_size, self.tokens)


class SendBudget:
    """One worker's door to the shared budget."""

    def __init__(self, rate: BucketPolicy | None, quota: DailyQuota | None) -> None:
        self.rate = rate
        self.quota = quota

    @classmethod
    def from_settings(cls, settings: Settings) -> SendBudget | None:
        """The configured budget, or None when no limit is set (the claim then costs nothing)."""
        rate = quota = None
        if settings.send_rate is not None:
            rate = BucketPolicy.of(settings.send_rate, settings.send_burst)
        if settings.send_daily_quota is not None:
            quota = DailyQuota.of(settings.send_daily_quota, settings.send_daily_critical_reserve)
        return cls(rate, quota) if rate or quota else None

    async def lane_limits(
        self,
        steps: ClaimSteps,
        now: dt.datetime,
        limits: Mapping[str, int],
        batch_size: int,
    ) -> tuple[dict[str, int], Granted]:
        """Lower each lane's limit to what the quota leaves and the bucket grants, in the
        claim's transaction (`steps`)."""
        at = now.timestamp()
        limits = dict(limits)
        granted = Granted()
        if self.quota is not None:
            if self.rate is None:
                await steps.lock_budget(at)
            else:  # the bucket's row lock serialises the count; take nothing yet
                await steps.take_tokens(self.rate, at, 0)
            critical_left, bulk_left = self.quota.left(await steps.sent_since(at - DAY))
            for lane in LANES:
                limits[lane] = min(limits[lane], critical_left if lane == CRITICAL else bulk_left)
            granted.quota_reached = bulk_left == 0
        if self.rate is not None:
            want = min(sum(limits.values()), batch_size)
            taken, left = await steps.take_tokens(self.rate, at, want)
            granted.tokens = taken
            bulk = bulk_allowance(self.rate, taken, left)
            for lane in LANES:  # critical fills first (lock_due's order), bulk keeps the reserve
                limits[lane] = min(limits[lane], taken if lane == CRITICAL else bulk)
        return limits, granted

    async def settle(
        self,
        steps: ClaimSteps,
        now: dt.datetime,
        granted: Granted,
        leased_by_lane: Mapping[str, int],
    ) -> None:
        """Give back the tokens not used and count what was leased (before the commit)."""
        leased = sum(leased_by_lane.values())
        unused = granted.tokens - leased if granted.tokens is not None else 0
        counted = leased if self.quota is not None else 0
        await steps.settle_budget(self.rate, unused, now.timestamp(), counted)

    async def throttled(self, engine: Engine, now: dt.datetime) -> None:
        """The provider said we send too fast: halve the shared rate; committed."""
        if await engine.halve_rate(now.timestamp()):
            log.warning("send rate halved: the provider throttled a send")


@dataclasses.dataclass(frozen=True)
class ClaimedBatch:
    """What one claim leased, and what it closed without an attempt (expired, suppressed...)."""

    leased: list[claims.Claim]
    not_sent: list[tuple[DueIntent, Decision]]
    waiting_for_tokens: bool = False  # the send rate's bucket was empty


class BatchClaimer:
    """Claims batches for one worker, each in a transaction of its engine."""

    def __init__(
        self,
        engine: Engine,
        settings: WorkerSettings,
        decisions: SendDecisions,
        clock: Callable[[], dt.datetime],
        worker_id: str,
        guard: SendGuard | None,
        budget: SendBudget | None,
    ) -> None:
        self._engine = engine
        self.settings = settings
        self.decisions = decisions
        self.clock = clock
        self.worker_id = worker_id
        self.guard = guard
        self.budget = budget

    async def claim(self, now: dt.datetime) -> ClaimedBatch:
        """Lock due intents, screen each, close those not to send, lease the rest; commit."""
        batch_size = self.settings.batch_size
        granted = None
        async with self._engine.claiming() as steps:
            lane_limits = None
            if self.guard:  # lanes paused by their circuit breaker, or probing
                lane_limits = await self.guard.lane_limits(steps, now, batch_size)
            limits = claims.lane_limits_within(batch_size, lane_limits)
            if self.budget:  # the shared rate and quota: critical takes tokens first
                limits, granted = await self.budget.lane_limits(steps, now, limits, batch_size)
                batch_size = granted.batch_limit(batch_size)
            batch = await self._lease_due(steps, now, batch_size, limits)
            if granted is not None:
                lanes = collections.Counter(claim.intent.lane for claim in batch.leased)
                await self.budget.settle(steps, now, granted, lanes)
        if self.guard:
            claimed = {claim.intent.lane for claim in batch.leased}
            await self.guard.release_unused_probes(self._engine, claimed, now)
        return dataclasses.replace(batch, waiting_for_tokens=batch_size == 0)

    async def _lease_due(
        self, steps: ClaimSteps, now: dt.datetime, batch_size: int, limits: dict[str, int]
    ) -> ClaimedBatch:
        """Lock due intents, screen each, close those not to send, lease the rest."""
        due = await steps.lock_due(now, batch_size, limits)
        to_send, not_sent = await self._screen(steps, due)
        await steps.close_unsent(not_sent, now)
        lease_expires_at = now + dt.timedelta(seconds=self.settings.lease_seconds)
        leased = await steps.lease(to_send, now, lease_expires_at, self.worker_id)
        return ClaimedBatch(leased, not_sent)

    async def _screen(self, steps: ClaimSteps, due: list[DueIntent]):
        """Split `due` into intents to send and (intent, decision) pairs not to send now."""
        suppressed = await steps.suppressed_among({i.recipient.lower() for i in due})
        to_send, not_sent = [], []
        for intent in due:
            decision = await self._decide(steps, intent, intent.recipient.lower() in suppressed)
            if decision is None:
                to_send.append(intent)
            else:
                not_sent.append((intent, decision))
        return to_send, not_sent

    async def _decide(
        self, steps: ClaimSteps, intent: DueIntent, suppressed: bool
    ) -> Decision | None:
        """The decision at claim on `intent` (None: send it); the application's eligibility
        check, where its purpose has one, on the session `steps` lends."""
        decide = self.decisions.at_claim
        if not self.decisions.eligibility.has_check(intent):
            return decide(intent, suppressed, None, self.clock())
        return await steps.check(lambda session: decide(intent, suppressed, session, self.clock()))

    async def give_back(
        self,
        unsent: list[claims.Claim],
        held_back: list[tuple[claims.Claim, dt.datetime]],
        now: dt.datetime,
    ) -> int:
        """Give back what a stop left unsent (due now) and what was held back (due at the
        time given: a refused lane's wait, a deferred domain's intent its own due time),
        without counting an attempt; commit. Return how many went back."""
        returned = [(claim, now) for claim in unsent] + held_back
        return await self._engine.give_back(returned, now) if returned else 0

    async def claim_critical(self, now: dt.datetime) -> ClaimedBatch | None:
        """The critical intents due at `now` (the breakers read as a claim reads them, the
        critical lane only), leased and committed; None when none is due (one read)."""
        batch_size = self.settings.batch_size
        async with self._engine.claiming() as steps:
            if not await steps.critical_due(now):
                return None
            lane_limits = None
            if self.guard:
                lane_limits = await self.guard.lane_limits(steps, now, batch_size)
            limits = claims.lane_limits_within(batch_size, lane_limits)
            critical_only = {lane: limits[lane] if lane == CRITICAL else 0 for lane in LANES}
            critical = await self._lease_due(steps, now, batch_size, critical_only)
        if self.guard:
            claimed = {CRITICAL} if critical.leased else set()
            await self.guard.release_unused_probes(self._engine, claimed, now)
        return critical


CHECK_EVERY = 50  # emails taken from a batch between two looks for critical intents


class CriticalCheck:
    """Counts the emails taken from the batch in flight; every ``CHECK_EVERY`` of them,
    claims the critical intents due meanwhile and puts them first in line."""

    def __init__(self, claimer: BatchClaimer, enabled: bool) -> None:
        self._claimer = claimer
        self._enabled = enabled
        self._taken = 0

    def start(self) -> None:
        """A batch begins."""
        self._taken = 0

    async def after_take(
        self, waiting: collections.deque[Claim], clock: Callable[[], dt.datetime]
    ) -> ClaimedBatch | None:
        """An email was taken from the batch, `waiting` the rest of it: on every
        ``CHECK_EVERY``-th with more waiting, the critical intents due by `clock` claimed
        and put first in `waiting`; what was claimed, or None when nothing was looked for,
        found or claimed."""
        self._taken += 1
        if not self._enabled or not waiting or self._taken % CHECK_EVERY:
            return None
        try:
            batch = await self._claimer.claim_critical(clock())
        except Exception:  # noqa: BLE001 - a bonus look: the next claim takes them first
            log.warning("could not look for critical intents during a batch", exc_info=True)
            return None
        if batch is not None:
            waiting.extendleft(reversed(batch.leased))
        return batch


def new_worker_id() -> str:
    """Return ``host:pid:random``, unique among every worker sharing the database."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


async def housekeeping(
    engine: Engine,
    worker_id: str,
    started_at: dt.datetime,
    decisions: SendDecisions,
    now: dt.datetime,
) -> list[tuple[ExpiredLease, Decision]]:
    """Beat, settle the leases of silent workers as decided, match provider events that
    came before their id; each committed. The leases taken back."""
    heartbeat = heartbeats.beat_values(
        worker_id, host=socket.gethostname(), pid=os.getpid(), started_at=started_at, now=now
    )
    await engine.beat(heartbeat)
    swept = await engine.sweep(now, decisions.at_lease_expiry)
    await engine.in_session(lambda session: _match_waiting_events(session, now))
    return swept


def _match_waiting_events(session: Session, now: dt.datetime) -> None:
    match_unmatched_events(session, now=now)
    session.commit()


def record_clean_stop(
    session_factory: sessionmaker[Session], worker_id: str, now: dt.datetime
) -> None:
    """Write on the heartbeat that the worker stopped cleanly at `now`; commit.

    A database that fails then is logged: the worker stops all the same.
    """
    try:
        with session_factory() as session:
            heartbeats.record_stop(session, worker_id=worker_id, now=now)
            session.commit()
    except SQLAlchemyError as error:
        log.warning(
            "the worker's stop was not recorded",
            extra=dict(worker_id=worker_id, error_type=type(error).__name__),
        )
