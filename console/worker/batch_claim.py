"""T1 of a tick: the protections' limits, a bounded batch locked, screened, leased; one commit.

Each of its transactions is awaited on the engine (``Engine.in_transaction``): on
PostgreSQL the sends in flight go on while it waits for the database.

Also the critical intents due since a batch was claimed, claimed while it is sent
(``critical_check``): the breakers read, the critical lane only.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.engine import Engine
from console.store import claims
from console.store.statements import DueIntent
from console.vocabulary import CRITICAL, LANES
from console.worker.decisions import SendDecisions
from console.worker.guard import SendGuard
from console.worker.send_budget import SendBudget
from console.worker.settings import WorkerSettings


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
        self._in_transaction = engine.in_transaction
        self.settings = settings
        self.decisions = decisions
        self.clock = clock
        self.worker_id = worker_id
        self.guard = guard
        self.budget = budget

    async def claim(self, now: dt.datetime) -> ClaimedBatch:
        """Lock due intents, screen each, close those not to send, lease the rest; commit."""
        return await self._in_transaction(lambda session: self._claim(session, now))

    def _claim(self, session: Session, now: dt.datetime) -> ClaimedBatch:
        batch_size = self.settings.batch_size
        granted = None
        lane_limits = None
        if self.guard:  # lanes paused by their circuit breaker, or probing
            lane_limits = self.guard.lane_limits(session, now, batch_size)
        limits = claims.lane_limits_within(batch_size, lane_limits)
        if self.budget:  # the shared rate and quota: critical takes tokens first
            limits, granted = self.budget.lane_limits(session, now, limits, batch_size)
            batch_size = granted.batch_limit(batch_size)
        batch = self._lease_due(session, now, batch_size, limits)
        leased = batch.leased
        if granted is not None:
            lanes = collections.Counter(claim.intent.lane for claim in leased)
            self.budget.settle(session, now, granted, lanes)
        session.commit()
        if self.guard:
            self.guard.release_unused_probes(session, {c.intent.lane for c in leased}, now)
        return dataclasses.replace(batch, waiting_for_tokens=batch_size == 0)

    def _lease_due(
        self, session: Session, now: dt.datetime, batch_size: int, limits: dict[str, int]
    ) -> ClaimedBatch:
        """Lock due intents, screen each, close those not to send, lease the rest."""
        due = self._engine.lock_due(session, now, batch_size, limits)
        to_send, not_sent = self._screen(session, due)
        claims.close_unsent(session, not_sent, now)
        lease_expires_at = now + dt.timedelta(seconds=self.settings.lease_seconds)
        leased = self._engine.lease(session, to_send, now, lease_expires_at, self.worker_id)
        return ClaimedBatch(leased, not_sent)

    def _screen(self, session: Session, due: list[DueIntent]):
        """Split `due` into intents to send and (intent, decision) pairs not to send now."""
        suppressed = self._engine.suppressed_among(session, {i.recipient.lower() for i in due})
        to_send, not_sent = [], []
        for intent in due:
            screened = self.clock()
            is_suppressed = intent.recipient.lower() in suppressed
            decision = self.decisions.at_claim(intent, is_suppressed, session, screened)
            if decision is None:
                to_send.append(intent)
            else:
                not_sent.append((intent, decision))
        return to_send, not_sent

    async def give_back(
        self,
        unsent: list[claims.Claim],
        held_back: list[tuple[claims.Claim, dt.datetime]],
        now: dt.datetime,
    ) -> int:
        """Give back what a stop left unsent (due now) and what a deferral held back (due at
        its end), without counting an attempt; commit. Return how many went back."""
        if not unsent and not held_back:
            return 0
        return await self._in_transaction(
            lambda session: self._give_back(session, unsent, held_back, now)
        )

    def _give_back(self, session: Session, unsent, held_back, now: dt.datetime) -> int:
        released = claims.release(session, unsent, now)
        for claim, until in held_back:
            released += claims.release(session, [claim], now, due_at=until)
        session.commit()
        return released

    async def claim_critical(self, now: dt.datetime) -> ClaimedBatch | None:
        """The critical intents due at `now` (the breakers read as a claim reads them, the
        critical lane only), leased and committed; None when none is due (one read)."""
        return await self._in_transaction(lambda session: self._critical(session, now))

    def _critical(self, session: Session, now: dt.datetime) -> ClaimedBatch | None:
        if not claims.critical_due(session.connection(), now):
            return None
        batch_size = self.settings.batch_size
        lane_limits = self.guard.lane_limits(session, now, batch_size) if self.guard else None
        limits = claims.lane_limits_within(batch_size, lane_limits)
        critical_only = {lane: limits[lane] if lane == CRITICAL else 0 for lane in LANES}
        critical = self._lease_due(session, now, batch_size, critical_only)
        session.commit()
        if self.guard:
            self.guard.release_unused_probes(session, {CRITICAL} if critical.leased else set(), now)
        return critical
