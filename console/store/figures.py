"""The figures the dashboard, /metrics and /healthz read, and the heartbeats of the workers.

Counts by status and lane, the oldest pending intent, latency against its targets, the
dashboard's gathering of them, and the worker panel. The heartbeat each worker writes every
tick is here too: it is the figure that says whether workers run. Every read is a grouped
count or an aggregate over an indexed range.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    case,
    cast,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from console.models import Attempt, Intent, ProviderEvent, Suppression, utcnow
from console.state_tables import LaneBreaker, WorkerHeartbeat
from console.store.intent_search import AGE_BUCKETS, age_conditions
from console.store.send_budget import CachedRates, SenderRate, sender_rates
from console.store.statements import dialect_of, insert_for
from console.vocabulary import AMBIGUOUS, DEAD, LANES, PENDING, STATUSES, SUBMITTED

# Dashboard ---------------------------------------------------------------------------------------
#
# The dashboard's figures: counts by status and lane, pending ages, the last hour, rates.

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
        oldest_pending=oldest_pending_by_lane(session),
        age_buckets={lane: _pending_age_buckets(session, lane, now) for lane in LANES},
        chart=_attempt_chart(session, now),
        last_tick_at=last_worker_tick_at(session),
        sender_rates=rates.get(session, now) if rates else sender_rates(session, now),
    )


def _status_lane_counts(session: Session, now: dt.datetime) -> dict[tuple[str, str], int]:
    """Count intents per status and lane, each an index range count.

    Submitted intents pile up without end, so they are counted over the last
    SUBMITTED_WINDOW_HOURS (by creation); every other status is counted in full.
    """
    others = [status for status in STATUSES if status != SUBMITTED]
    counts = count_statuses(session, others)
    since = now - dt.timedelta(hours=SUBMITTED_WINDOW_HOURS)
    counts |= count_submitted_since(session, since)
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


# Queue figures -----------------------------------------------------------------------------------
#
# The queue's figures that the dashboard, /metrics and /healthz each read.
#
# Counts by status and lane, the oldest pending intent per lane and the workers' last ticks, plus
# the other figures /metrics shows (suppressions, recent provider events, lane breakers). Every
# query is a grouped count or an aggregate over an indexed range; none of them commits.

Counts = dict[tuple[str, str], int]  # (status, lane) -> intents


def limit_statement_time(session: Session, milliseconds: int) -> None:
    """Bound each statement of the caller's transaction to `milliseconds` (PostgreSQL only)."""
    if dialect_of(session) == "postgresql":
        session.execute(text(f"SET LOCAL statement_timeout = {int(milliseconds)}"))


def count_every_status(session: Session) -> Counts:
    """Count intents by status and lane: one pass over the table (or its index)."""
    query = select(Intent.status, Intent.lane, func.count()).group_by(Intent.status, Intent.lane)
    return {(status, lane): n for status, lane, n in session.execute(query)}


def count_statuses(session: Session, statuses: Iterable[str]) -> Counts:
    """Count intents of `statuses` by status and lane: index ranges over those statuses only."""
    query = (
        select(Intent.status, Intent.lane, func.count())
        .where(Intent.status.in_(list(statuses)))
        .group_by(Intent.status, Intent.lane)
    )
    return {(status, lane): n for status, lane, n in session.execute(query)}


def count_submitted_since(session: Session, since: dt.datetime) -> Counts:
    """Count submitted intents created since `since`, one index range count per lane."""
    counts = {}
    for lane in LANES:
        query = select(func.count()).where(
            Intent.status == SUBMITTED, Intent.lane == lane, Intent.created_at >= since
        )
        counts[(SUBMITTED, lane)] = session.execute(query).scalar_one()
    return counts


def oldest_pending_by_lane(session: Session) -> dict[str, dt.datetime | None]:
    """Return the creation time of the oldest pending intent of each lane (None if none)."""
    return {lane: _oldest_pending(session, lane) for lane in LANES}


def _oldest_pending(session: Session, lane: str) -> dt.datetime | None:
    query = select(func.min(Intent.created_at)).where(Intent.status == PENDING, Intent.lane == lane)
    return session.execute(query).scalar_one()


def last_worker_tick_at(session: Session) -> dt.datetime | None:
    """Return the most recent tick of any worker, None before the first."""
    return session.execute(select(func.max(WorkerHeartbeat.last_tick_at))).scalar_one()


def count_workers_ticked_since(session: Session, since: dt.datetime) -> int:
    """Count the workers whose last tick is at or after `since`."""
    query = select(func.count()).where(WorkerHeartbeat.last_tick_at >= since)
    return session.execute(query).scalar_one()


def count_suppressions_by_reason(session: Session) -> dict[str, int]:
    """Count suppressed addresses by reason."""
    query = select(Suppression.reason, func.count()).group_by(Suppression.reason)
    return {reason: n for reason, n in session.execute(query)}


def count_provider_events_since(session: Session, since: dt.datetime) -> dict[str, int]:
    """Count provider events received since `since`, by event type."""
    query = (
        select(ProviderEvent.event_type, func.count())
        .where(ProviderEvent.received_at >= since)
        .group_by(ProviderEvent.event_type)
    )
    return {event_type: n for event_type, n in session.execute(query)}


def lane_breaker_states(session: Session) -> dict[str, tuple[str, float | None]]:
    """Return each lane breaker row's state and failure rate, by lane."""
    query = select(LaneBreaker.lane, LaneBreaker.state, LaneBreaker.failure_rate)
    return {lane: (state, rate) for lane, state, rate in session.execute(query)}


# Latency -----------------------------------------------------------------------------------------
#
# User-visible latency: how long mail took from enqueue to the provider's acceptance.
#
# Read from the intents themselves (``submitted_at - created_at``), through the index on
# ``submitted_at``:
#
# - ``lane_percentiles``: p50 and p99 per lane over a window (nearest rank: the window's intents
#   sorted by latency, the one at rank ⌈q·n⌉);
# - ``over_target_by_minute``: per lane and minute, how many intents were submitted and how many
#   took longer than their target (per template, else per lane);
# - ``latencies_after``: the intents submitted after a point, a page at a time, for the
#   ``/metrics`` histogram.

SECONDS_PER_MINUTE = 60


@dataclasses.dataclass(frozen=True)
class Percentiles:
    count: int
    p50_seconds: float | None
    p99_seconds: float | None


def latency_seconds(dialect: str) -> Any:
    """SQL: seconds from an intent's enqueue to its acceptance."""
    if dialect == "postgresql":
        return func.extract("epoch", Intent.submitted_at - Intent.created_at)
    return (func.julianday(Intent.submitted_at) - func.julianday(Intent.created_at)) * 86400.0


def _minute(dialect: str) -> Any:
    """SQL: the minute (since the epoch) an intent was submitted in."""
    if dialect == "postgresql":
        return cast(func.floor(func.extract("epoch", Intent.submitted_at) / SECONDS_PER_MINUTE),
                    Integer)  # fmt: skip
    return cast(func.strftime("%s", Intent.submitted_at), Integer) / SECONDS_PER_MINUTE


def _submitted_between(since: dt.datetime, until: dt.datetime) -> list[Any]:
    return [Intent.submitted_at >= since, Intent.submitted_at < until]


def lane_percentiles(
    session: Session, since: dt.datetime, until: dt.datetime
) -> dict[str, Percentiles]:
    """p50 and p99 of the enqueue → acceptance time of each lane's mail submitted in the window."""
    latency = latency_seconds(dialect_of(session))
    figures = {}
    for lane in LANES:
        window = [*_submitted_between(since, until), Intent.lane == lane]
        count = session.execute(select(func.count()).where(*window)).scalar_one()

        def at_rank(quantile: float, window=window, count=count) -> float | None:
            if not count:
                return None
            rank = max(math.ceil(quantile * count), 1) - 1
            query = select(latency).where(*window).order_by(latency).offset(rank).limit(1)
            return max(float(session.execute(query).scalar_one()), 0.0)

        figures[lane] = Percentiles(count, at_rank(0.5), at_rank(0.99))
    return figures


def target_seconds(lane_targets: Mapping[str, float], template_targets: Mapping[str, float]):
    """SQL: each intent's latency target, its template's own, else its lane's."""
    by_lane = case(
        *((Intent.lane == lane, literal(float(target))) for lane, target in lane_targets.items()),
        else_=literal(float(max(lane_targets.values()))),
    )
    if not template_targets:
        return by_lane
    own = {name: literal(float(target)) for name, target in template_targets.items()}
    return case(own, value=Intent.template, else_=by_lane)


def over_target_by_minute(
    session: Session,
    since: dt.datetime,
    until: dt.datetime,
    lane_targets: Mapping[str, float],
    template_targets: Mapping[str, float],
) -> dict[tuple[str, int], tuple[int, int]]:
    """(lane, minute since the epoch) -> (intents submitted, those slower than their target)."""
    dialect = dialect_of(session)
    minute = _minute(dialect).label("minute")
    slow = latency_seconds(dialect) > target_seconds(lane_targets, template_targets)
    query = (
        select(Intent.lane, minute, func.count(), func.sum(case((slow, 1), else_=0)))
        .where(*_submitted_between(since, until))
        .group_by(Intent.lane, minute)
    )
    return {(lane, int(m)): (int(n), int(over or 0)) for lane, m, n, over in session.execute(query)}


def latencies_after(
    session: Session, after: tuple[dt.datetime, int], until: dt.datetime, limit: int
) -> list[Any]:
    """Intents submitted after `after` (submitted_at, id) and before `until`, oldest first.

    Each row: id, submitted_at, lane, template, latency_seconds.
    """
    latency = latency_seconds(dialect_of(session)).label("latency_seconds")
    query = (
        select(Intent.id, Intent.submitted_at, Intent.lane, Intent.template, latency)
        .where(
            or_(
                Intent.submitted_at > after[0],
                and_(Intent.submitted_at == after[0], Intent.id > after[1]),
            ),
            Intent.submitted_at < until,
        )
        .order_by(Intent.submitted_at, Intent.id)
        .limit(limit)
    )
    return list(session.execute(query))


# Worker panel ------------------------------------------------------------------------------------
#
# The workers the dashboard lists: each worker's heartbeat and clean stop, newest tick first.

MOST_WORKERS_SHOWN = 20


@dataclasses.dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str | None
    pid: int | None
    started_at: dt.datetime
    last_tick_at: dt.datetime
    version: str | None  # None: a worker from before versions were recorded
    stopped_at: dt.datetime | None = None  # None: running, or gone without a clean stop


def recent_workers(session: Session, *, limit: int = MOST_WORKERS_SHOWN) -> list[WorkerRow]:
    """Return the workers with the most recent ticks, newest first."""
    columns = [getattr(WorkerHeartbeat, field.name) for field in dataclasses.fields(WorkerRow)]
    query = select(*columns).order_by(WorkerHeartbeat.last_tick_at.desc()).limit(limit)
    return [WorkerRow(*row) for row in session.execute(query)]


# Heartbeats --------------------------------------------------------------------------------------
#
# The worker_heartbeat row of each worker: written every tick, with the version it runs, and once
# more when the worker stops cleanly.

DISTRIBUTION = "outbox-console"
VERSION_LONGEST = 64


@functools.cache
def product_version() -> str:
    """The installed product's version, e.g. "0.1.0"; "unknown" when it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)[:VERSION_LONGEST]
    except metadata.PackageNotFoundError:
        return "unknown"


def beat(
    session: Session,
    *,
    worker_id: str,
    host: str,
    pid: int,
    started_at: dt.datetime,
    now: dt.datetime,
    version: str | None = None,
) -> None:
    """Insert or refresh this worker's heartbeat row (the caller commits).

    `version` defaults to this process's product version; a worker upgraded in
    place writes its new version with its next tick.
    """
    version = (version or product_version())[:VERSION_LONGEST]
    statement = insert_for(dialect_of(session))(WorkerHeartbeat).values(
        worker_id=worker_id,
        host=host,
        pid=pid,
        started_at=started_at,
        last_tick_at=now,
        version=version,
    )
    excluded = statement.excluded
    statement = statement.on_conflict_do_update(
        index_elements=["worker_id"],
        set_={
            "last_tick_at": excluded.last_tick_at,
            "version": excluded.version,
            "stopped_at": None,  # it ticks: it runs
        },
    )
    session.execute(statement)


def record_stop(session: Session, *, worker_id: str, now: dt.datetime) -> None:
    """Mark this worker's heartbeat as stopped cleanly at `now` (the caller commits)."""
    statement = update(WorkerHeartbeat).where(WorkerHeartbeat.worker_id == worker_id)
    session.execute(statement.values(stopped_at=now))
