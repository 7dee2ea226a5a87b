"""The dashboard's figures: counts by status and lane, pending ages, the last hour, rates."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import ColumnElement, case, func, literal, select
from sqlalchemy.orm import Session

from console.models import Attempt, Intent, utcnow
from console.store import queue_figures
from console.store.search_filters import AGE_BUCKETS, age_conditions
from console.store.sender_rates import CachedRates, SenderRate, sender_rates
from console.store.sql import dialect_of
from console.vocabulary import AMBIGUOUS, DEAD, LANES, PENDING, STATUSES, SUBMITTED

SUBMITTED_WINDOW_HOURS = 24
CHART_MINUTES = 60
FAILED_OUTCOMES = ("transient", "permanent", "ambiguous")


@dataclasses.dataclass(frozen=True)
class ChartBar:
    minute: int  # 0 = the oldest minute shown, CHART_MINUTES - 1 = the current minute
    accepted: int
    failed: int


@dataclasses.dataclass(frozen=True)
class Dashboard:
    now: dt.datetime
    counts: dict[tuple[str, str], int]  # (status, lane) -> intents
    oldest_pending: dict[str, dt.datetime | None]  # lane -> created_at of the oldest
    age_buckets: dict[str, dict[str, int]]  # lane -> bucket name -> pending intents
    chart: list[ChartBar]
    last_tick_at: dt.datetime | None
    sender_rates: dict[tuple[str, str], SenderRate]  # (kind, window) -> rate

    def status_total(self, status: str) -> int:
        return sum(count for (s, _), count in self.counts.items() if s == status)

    def lane_total(self, lane: str) -> int:
        return sum(count for (_, la), count in self.counts.items() if la == lane)

    @property
    def ambiguous(self) -> int:
        return self.status_total(AMBIGUOUS)

    @property
    def dead(self) -> int:
        return self.status_total(DEAD)

    def oldest_pending_seconds(self, lane: str) -> float | None:
        oldest = self.oldest_pending.get(lane)
        return None if oldest is None else max(0.0, (self.now - oldest).total_seconds())


def dashboard(
    session: Session, now: dt.datetime | None = None, *, rates: CachedRates | None = None
) -> Dashboard:
    """Gather every figure of the dashboard in a handful of indexed queries.

    The sender rates come from `rates` when given (counted at most a minute ago).
    """
    now = now or utcnow()
    return Dashboard(
        now=now,
        counts=_status_lane_counts(session, now),
        oldest_pending=queue_figures.oldest_pending_by_lane(session),
        age_buckets={lane: _pending_age_buckets(session, lane, now) for lane in LANES},
        chart=_attempt_chart(session, now),
        last_tick_at=queue_figures.last_worker_tick_at(session),
        sender_rates=rates.get(session, now) if rates else sender_rates(session, now),
    )


def _status_lane_counts(session: Session, now: dt.datetime) -> dict[tuple[str, str], int]:
    """Count intents per status and lane, each an index range count.

    Submitted intents pile up without end, so they are counted over the last
    SUBMITTED_WINDOW_HOURS (by creation); every other status is counted in full.
    """
    others = [status for status in STATUSES if status != SUBMITTED]
    counts = queue_figures.count_statuses(session, others)
    since = now - dt.timedelta(hours=SUBMITTED_WINDOW_HOURS)
    counts |= queue_figures.count_submitted_since(session, since)
    return {key: count for key, count in counts.items() if count}


def _pending_age_buckets(session: Session, lane: str, now: dt.datetime) -> dict[str, int]:
    """Count pending intents of `lane` per age bucket, one indexed range count each."""
    buckets = {}
    for name in AGE_BUCKETS:
        query = select(func.count()).where(
            Intent.status == PENDING, Intent.lane == lane, *age_conditions(name, now)
        )
        buckets[name] = session.execute(query).scalar_one()
    return buckets


def _minute_expression(dialect: str, since: dt.datetime) -> ColumnElement[int]:
    """Whole minutes between `since` and an attempt's start, computed by the database."""
    since_epoch = int(since.timestamp())
    if dialect == "postgresql":
        seconds = func.extract("epoch", Attempt.started_at) - since_epoch
        return func.floor(seconds / 60).cast(Attempt.attempt_number.type)
    epoch = func.cast(func.strftime("%s", Attempt.started_at), Attempt.attempt_number.type)
    return (epoch - literal(since_epoch)) // 60


def _attempt_chart(session: Session, now: dt.datetime) -> list[ChartBar]:
    """Attempts started per clock minute over the last hour (the last bar is this minute)."""
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=CHART_MINUTES - 1)
    minute = _minute_expression(dialect_of(session), since).label("minute")
    failed = case((Attempt.outcome.in_(FAILED_OUTCOMES), 1), else_=0)
    accepted = case((Attempt.outcome == "accepted", 1), else_=0)
    query = (
        select(minute, func.sum(accepted), func.sum(failed))
        .where(Attempt.started_at >= since)
        .group_by(minute)
    )
    per_minute = {int(m): (int(a or 0), int(f or 0)) for m, a, f in session.execute(query)}
    return [ChartBar(m, *per_minute.get(m, (0, 0))) for m in range(CHART_MINUTES)]
