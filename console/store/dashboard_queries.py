"""The dashboard's own queries: counts by status and lane, pending ages, the last hour's attempts.

Each is an index range count or a grouped count; none commits. The figures the dashboard shares
with /metrics and /healthz are ``console.store.queue_figures``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import ColumnElement, case, func, literal, select
from sqlalchemy.orm import Session

from console.models import Attempt, Intent
from console.store.intent_search import AGE_BUCKETS, age_conditions
from console.store.queue_figures import count_statuses, count_submitted_since
from console.store.sql_helpers import dialect_of
from console.vocabulary import PENDING, STATUSES, SUBMITTED

SUBMITTED_WINDOW_HOURS = 24
CHART_MINUTES = 60
FAILED_OUTCOMES = ("transient", "permanent", "ambiguous")


@dataclasses.dataclass(frozen=True)
class ChartBar:
    minute: int  # 0 = the oldest minute shown, CHART_MINUTES - 1 = the current minute
    accepted: int
    failed: int


def status_lane_counts(session: Session, now: dt.datetime) -> dict[tuple[str, str], int]:
    """Count intents per status and lane, each an index range count.

    Submitted intents pile up without end, so they are counted over the last
    SUBMITTED_WINDOW_HOURS (by creation); every other status is counted in full.
    """
    others = [status for status in STATUSES if status != SUBMITTED]
    counts = count_statuses(session, others)
    since = now - dt.timedelta(hours=SUBMITTED_WINDOW_HOURS)
    counts |= count_submitted_since(session, since)
    return {key: count for key, count in counts.items() if count}


def pending_age_buckets(session: Session, lane: str, now: dt.datetime) -> dict[str, int]:
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


def attempt_chart(session: Session, now: dt.datetime) -> list[ChartBar]:
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
