"""Protections of the send loop: lane circuit breakers and per-domain deferral.

The decisions are pure (``console.core.breaker``, ``console.core.domain_backoff``);
this module holds their shared state in the database so every worker process
obeys them and the console can show them:

* ``lane_breaker`` rows — a worker whose window of outcomes crosses the
  threshold opens the lane's breaker (compare-and-set: the first one wins);
  every worker reads the rows at each tick and claims nothing from a paused
  lane; when the pause is over exactly one worker takes the probe.
* a completed run of 4yz from a domain moves that domain's due intents'
  ``next_attempt_at`` forward, in one UPDATE every worker then sees.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from console.config import Settings
from console.core import breaker
from console.core.breaker import BreakerPolicy, BreakerState
from console.core.domain_backoff import (
    Deferral,
    DomainBackoffPolicy,
    DomainRuns,
    recipient_domain,
)
from console.models import AlertState, Intent, LaneBreaker
from console.ops import metrics
from console.vocabulary import CLOSED, HALF_OPEN, LANES, OPEN, PENDING

log = logging.getLogger(__name__)

_LIKE_SPECIALS = str.maketrans({"%": r"\%", "_": r"\_", "\\": r"\\"})


def read_breakers(session: Session) -> dict[str, BreakerState]:
    """Return every lane's breaker state (closed when the lane has no row yet)."""
    rows = {row.lane: row for row in session.execute(select(LaneBreaker)).scalars()}
    return {lane: _state_of(rows.get(lane)) for lane in LANES}


def _state_of(row: LaneBreaker | None) -> BreakerState:
    if row is None:
        return BreakerState()
    return BreakerState(row.state, row.trips, row.failure_rate, row.opened_at, row.resume_at)


def _write(
    session: Session,
    lane: str,
    expected: BreakerState,
    new: BreakerState,
    now: dt.datetime,
    owner: str | None = None,
) -> bool:
    """Move `lane` from `expected` to `new` unless another worker moved it first."""
    values = dict(
        state=new.state,
        trips=new.trips,
        failure_rate=new.failure_rate,
        opened_at=new.opened_at,
        resume_at=new.resume_at,
        probe_owner=owner,
        updated_at=now,
    )
    if expected.state == CLOSED and expected.trips == 0:
        if _insert_if_absent(session, lane, values):
            return True
    moved = session.execute(
        update(LaneBreaker)
        .where(
            LaneBreaker.lane == lane,
            LaneBreaker.state == expected.state,
            LaneBreaker.trips == expected.trips,
        )
        .values(**values)
    ).rowcount
    return moved == 1


def _insert_if_absent(session: Session, lane: str, values: dict) -> bool:
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = (
        insert(LaneBreaker)
        .values(lane=lane, **values)
        .on_conflict_do_nothing(index_elements=["lane"])
        .returning(LaneBreaker.lane)
    )
    return session.execute(statement).scalar_one_or_none() is not None


def lane_pause_notices(
    states: dict[str, BreakerState], firing: Sequence[AlertState] = ()
) -> list[str]:
    """Say, for the dashboard, which lanes their circuit breaker holds back and until when,
    unless a firing ``breaker_open`` alert already says so."""
    announced = {state.condition for state in firing}
    notices = []
    for lane, state in states.items():
        if f"breaker_open:{lane}" in announced:
            continue
        if state.state == OPEN and state.resume_at is not None:
            rate = (
                f"{state.failure_rate:.0%} of recent attempts failed; "
                if state.failure_rate
                else ""
            )
            notices.append(
                f"The {lane} lane is paused by its circuit breaker: {rate}"
                f"a probe goes at {state.resume_at:%H:%M:%S} UTC"
            )
        elif state.state == HALF_OPEN:
            notices.append(f"The {lane} lane is paused: one probe is testing the provider")
    return notices


def defer_domain(session: Session, deferral: Deferral) -> int:
    """Move every pending intent of the domain due before `until` to `until`."""
    pattern = "%@" + deferral.domain.translate(_LIKE_SPECIALS)
    return session.execute(
        update(Intent)
        .where(
            Intent.status == PENDING,
            Intent.next_attempt_at < deferral.until,
            Intent.recipient.like(pattern, escape="\\"),
        )
        .values(next_attempt_at=deferral.until)
    ).rowcount


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

    Call lane_limits() before each claim and after_outcome() after each recorded attempt.
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

    def lane_limits(self, session: Session, now: dt.datetime, batch_size: int) -> dict[str, int]:
        """Return how many intents this worker may claim per lane now (0: paused, 1: probe)."""
        previous, self.states = self.states, read_breakers(session)
        limits = {}
        for lane, state in self.states.items():
            if state.state == CLOSED and previous[lane].state != CLOSED:
                self.windows[lane].clear()  # a new cycle: old failures are history
            mode = breaker.claim_mode(state, now)
            if mode == breaker.PROBE:
                mode = self._take_probe(session, lane, state, now)
            limits[lane] = {breaker.NORMAL: batch_size, breaker.PROBE: 1}.get(mode, 0)
        session.commit()
        return limits

    def _take_probe(self, session: Session, lane: str, state: BreakerState, now) -> str:
        probing = breaker.start_probe(state, self.policy.breaker, now)
        if not _write(session, lane, state, probing, now, owner=self.worker_id):
            return breaker.PAUSED
        self.states[lane] = probing
        self.probing.add(lane)
        log.warning("circuit breaker probing", extra={"lane": lane, "breaker_state": HALF_OPEN})
        return breaker.PROBE

    def release_unused_probes(self, session: Session, claimed_lanes: set[str], now) -> None:
        """Give back the probe of every lane this worker claimed nothing from."""
        for lane in self.probing - claimed_lanes:
            self.probe_unused(session, lane, now)

    def probe_unused(self, session: Session, lane: str, now: dt.datetime) -> None:
        """Nothing was due in a lane this worker was to probe: let the next tick try again."""
        if lane not in self.probing:
            return
        self.probing.discard(lane)
        state = self.states[lane]
        reopened = dataclasses.replace(state, state=OPEN, resume_at=now)
        _write(session, lane, state, reopened, now)
        session.commit()

    def after_outcome(
        self,
        session: Session,
        *,
        lane: str,
        recipient: str,
        outcome: str,
        code: int | None,
        reached_transport: bool,
        now: dt.datetime,
    ) -> None:
        """Feed one recorded outcome to the breaker and the per-domain runs; commit."""
        if reached_transport:
            if lane in self.probing:
                self._settle_probe(session, lane, outcome, code, now)
            else:
                self._count_towards_breaker(session, lane, outcome, code, now)
        deferral = self.domain_runs.record(recipient_domain(recipient), outcome, code, now)
        if deferral is not None:
            deferred = defer_domain(session, deferral)
            metrics.DOMAIN_DEFERRALS.inc()
            log.warning(
                "recipient domain deferred after a run of 4yz",
                extra={"recipient_domain": deferral.domain, "count": deferred, "code": code},
            )
        session.commit()

    def _settle_probe(self, session: Session, lane: str, outcome: str, code, now) -> None:
        self.probing.discard(lane)
        state = self.states[lane]
        settled = breaker.after_probe(state, outcome, self.policy.breaker, now, code)
        if _write(session, lane, state, settled, now):
            self.states[lane] = settled
            self.windows[lane].clear()
        log.warning(
            "circuit breaker probe answered",
            extra={"lane": lane, "outcome": outcome, "breaker_state": settled.state},
        )

    def _count_towards_breaker(self, session: Session, lane: str, outcome: str, code, now):
        window = self.windows[lane]
        window.record(outcome, code)
        state = self.states[lane]
        opened = breaker.should_trip(state, window, self.policy.breaker, now)
        if opened is None:
            return
        window.clear()
        if _write(session, lane, state, opened, now):
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
