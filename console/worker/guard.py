"""Protections of the send loop: lane circuit breakers and per-domain deferral.

The decisions are pure (``console.core.breaker``, ``console.core.domain_backoff``);
this module holds their shared state in the database so every worker process
obeys them and the console can show them:

* ``lane_breaker`` rows — a worker whose window of outcomes crosses the
  threshold opens the lane's breaker (compare-and-set: the first one wins);
  every worker reads the rows at each tick and claims nothing from a paused
  lane; when the pause is over exactly one worker takes the probe.
* a completed run of throttling signals from a domain moves that domain's due
  intents' ``next_attempt_at`` forward, in one UPDATE every worker then sees.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable

from console.config import Settings
from console.core import breaker
from console.core.breaker import BreakerPolicy, BreakerState
from console.core.domain_backoff import (
    Deferral,
    DomainBackoffPolicy,
    DomainRuns,
    recipient_domain,
)
from console.core.send_result import SendResult
from console.core.throttle_signals import reply_of
from console.engine import Engine
from console.engine.base import ClaimSteps
from console.vocabulary import ACCEPTED, CLOSED, HALF_OPEN, LANES, OPEN
from console.worker import reporting

log = logging.getLogger(__name__)
Write = Callable[[Engine], Awaitable[None]]  # a write after an outcome, committed by the engine


@dataclasses.dataclass(frozen=True)
class GuardPolicy:
    breaker: BreakerPolicy = BreakerPolicy()
    domains: DomainBackoffPolicy = DomainBackoffPolicy()

    @classmethod
    def from_settings(cls, settings: Settings) -> GuardPolicy:
        return cls(
            BreakerPolicy(
                window_attempts=settings.breaker_window_attempts,
                failure_rate=settings.breaker_failure_rate,
                open_seconds=settings.breaker_open_seconds,
            ),
            DomainBackoffPolicy(
                run_length=settings.domain_backoff_run,
                base_seconds=settings.domain_backoff_seconds,
                cap_seconds=max(settings.domain_backoff_seconds, settings.retry_cap_seconds),
            ),
        )


class SendGuard:
    """One worker's view of the protections.

    Call lane_limits() before each claim and writes_after() after each recorded attempt.
    """

    def __init__(self, policy: GuardPolicy, worker_id: str) -> None:
        self.policy = policy
        self.worker_id = worker_id
        self.windows = {
            lane: breaker.FailureWindow(policy.breaker.window_attempts) for lane in LANES
        }
        self.domain_runs = DomainRuns(policy.domains)
        self.states: dict[str, BreakerState] = {lane: BreakerState() for lane in LANES}
        self.probing: set[str] = set()
        # domains this worker saw defer, and until when: the rest of a batch holds back
        self.deferred_until: dict[str, dt.datetime] = {}

    async def lane_limits(
        self, steps: ClaimSteps, now: dt.datetime, batch_size: int
    ) -> dict[str, int]:
        """Return how many intents this worker may claim per lane now (0: paused, 1: probe);
        a probe is taken in the claim's transaction (`steps`)."""
        seen = dict(self.states)
        stored = await steps.read_breakers()
        # the read is awaited while this worker's records go on: a breaker one of them
        # moved meanwhile (written and committed first) is newer than the read
        stored.update({lane: state for lane, state in self.states.items() if state != seen[lane]})
        previous, self.states = seen, stored
        limits = {}
        for lane, state in self.states.items():
            if state.state == CLOSED and previous[lane].state != CLOSED:
                self.windows[lane].clear()  # a new cycle: old failures are history
            mode = breaker.claim_mode(state, now)
            if mode == breaker.PROBE:
                mode = await self._take_probe(steps, lane, state, now)
            limits[lane] = {breaker.NORMAL: batch_size, breaker.PROBE: 1}.get(mode, 0)
        return limits

    async def _take_probe(self, steps: ClaimSteps, lane: str, state: BreakerState, now) -> str:
        probing = breaker.start_probe(state, self.policy.breaker, now)
        if not await steps.move_breaker(lane, state, probing, now, self.worker_id):
            return breaker.PAUSED
        self.states[lane] = probing
        self.probing.add(lane)
        log.warning("circuit breaker probing", extra={"lane": lane, "breaker_state": HALF_OPEN})
        return breaker.PROBE

    async def release_unused_probes(
        self, engine: Engine, claimed_lanes: set[str], now: dt.datetime
    ) -> None:
        """Give back the probe of every lane this worker claimed nothing from; committed."""
        for lane in self.probing - claimed_lanes:
            await self.probe_unused(engine, lane, now)

    async def probe_unused(self, engine: Engine, lane: str, now: dt.datetime) -> None:
        """Nothing was due in a lane this worker was to probe: let the next tick try again."""
        if lane not in self.probing:
            return
        self.probing.discard(lane)
        state = self.states[lane]
        reopened = dataclasses.replace(state, state=OPEN, resume_at=now)
        await engine.move_breaker(lane, state, reopened, now)

    def note_domain_outcome(
        self, recipient: str, outcome: str, result: SendResult, now: dt.datetime
    ) -> Deferral | None:
        """Count one outcome towards its domain's run (in memory, at once, before it is
        recorded); return the deferral a completed run of throttling signals makes. The
        rest of this worker's batch for that domain then holds back (``deferral_of``)."""
        domain = recipient_domain(recipient)
        deferral = self.domain_runs.record(domain, outcome, reply_of(result), now)
        if deferral is not None:
            self.deferred_until[deferral.domain] = deferral.until
        return deferral

    async def after_outcome(self, engine: Engine, **outcome) -> None:
        """Feed one recorded outcome to the breaker and store what that calls for at once
        (``writes_after``, each write committed)."""
        for write in self.writes_after(**outcome):
            await write(engine)

    def writes_after(
        self,
        *,
        lane: str,
        outcome: str,
        code: int | None,
        reached_transport: bool,
        now: dt.datetime,
        deferral: Deferral | None = None,
        message_level: bool = False,
        throttled: bool = False,
    ) -> list[Write]:
        """Feed one recorded outcome to the breaker (in memory, now); return the writes it
        calls for, each taking the engine and committing: the breaker moved, the domain
        deferred. Most outcomes call for none, and then no transaction is needed.

        `message_level`: a refusal of this message alone, never the provider's failure;
        `throttled`: the provider limits our rate (the send budget slows down), not counted.
        """
        writes = []
        if reached_transport:
            if lane in self.probing:
                answered = message_level or throttled  # the relay answered
                writes.append(
                    self._settle_probe(lane, ACCEPTED if answered else outcome, code, now)
                )
            elif not throttled:
                writes.extend(self._count_towards_breaker(lane, outcome, code, now, message_level))
        if deferral is not None:
            writes.append(lambda engine: self._store_deferral(engine, deferral, code, now))
        return writes

    async def _store_deferral(self, engine: Engine, deferral: Deferral, code, now) -> None:
        deferred = await engine.defer_domain(deferral, code, now)
        reporting.DOMAIN_DEFERRALS.inc()
        log.warning(
            "recipient domain deferred after a run of throttling replies",
            extra={"recipient_domain": deferral.domain, "count": deferred, "code": code},
        )

    def deferral_of(self, recipient: str, now: dt.datetime) -> dt.datetime | None:
        """The end of a deferral this worker saw for the recipient's domain, if not over."""
        until = self.deferred_until.get(recipient_domain(recipient))
        return until if until is not None and until > now else None

    def _settle_probe(self, lane: str, outcome: str, code, now) -> Write:
        self.probing.discard(lane)
        state = self.states[lane]
        settled = breaker.after_probe(state, outcome, self.policy.breaker, now, code)
        log.warning(
            "circuit breaker probe answered",
            extra={"lane": lane, "outcome": outcome, "breaker_state": settled.state},
        )

        async def store(engine: Engine) -> None:
            if await self._write_breaker(engine, lane, state, settled, now):
                self.states[lane] = settled
                self.windows[lane].clear()

        return store

    async def trip(
        self, engine: Engine, lane: str, now: dt.datetime, code: int | None
    ) -> dt.datetime:
        """Open the lane's breaker at once (the relay refused the session); committed.

        Return when a probe may go: the rest of the lane waits until then.
        """
        self.probing.discard(lane)
        state = self.states[lane]
        opened = breaker.trip_now(state, self.policy.breaker, now)
        if await self._write_breaker(engine, lane, state, opened, now):
            self.states[lane] = opened
            self.windows[lane].clear()
        else:  # another worker moved it first: obey what is stored
            self.states[lane] = (await engine.read_breakers())[lane]
        log.error(
            "circuit breaker opened: the relay refused the session",
            extra={"lane": lane, "breaker_state": OPEN, "code": code},
        )
        return self.states[lane].resume_at or opened.resume_at

    def _count_towards_breaker(
        self, lane: str, outcome: str, code, now, message_level=False
    ) -> list[Write]:
        window = self.windows[lane]
        window.record(outcome, code, message_level)
        state = self.states[lane]
        opened = breaker.should_trip(state, window, self.policy.breaker, now)
        if opened is None:
            return []
        window.clear()

        async def store(engine: Engine) -> None:
            if await self._write_breaker(engine, lane, state, opened, now):
                self.states[lane] = opened
                log.error(
                    "circuit breaker opened: lane paused",
                    extra={
                        "lane": lane,
                        "breaker_state": OPEN,
                        "failure_rate": round(opened.failure_rate or 0, 3),
                        "retry_in_seconds": self.policy.breaker.pause_seconds(opened.trips),
                    },
                )

        return [store]

    async def _write_breaker(
        self, engine: Engine, lane: str, seen: BreakerState, new: BreakerState, now: dt.datetime
    ) -> bool:
        """Store `new` for `lane` if it still holds `seen`; committed before this worker's
        memory shows it. On PostgreSQL a claim may read the breakers while this write
        waits (both awaited on the event loop): a state in memory is then never newer
        than what that claim's read can see (``lane_limits``)."""
        return await engine.move_breaker(lane, seen, new, now)
