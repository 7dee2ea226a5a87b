"""User-visible latency: how long mail took from enqueue to the provider's acceptance.

Read from the intents themselves (``submitted_at - created_at``), through the index on
``submitted_at``:

- ``lane_percentiles``: p50 and p99 per lane over a window (nearest rank: the window's intents
  sorted by latency, the one at rank ⌈q·n⌉);
- ``over_target_by_minute``: per lane and minute, how many intents were submitted and how many
  took longer than their target (per template, else per lane);
- ``latencies_after``: the intents submitted after a point, a page at a time, for the
  ``/metrics`` histogram.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Integer, and_, case, cast, func, literal, or_, select
from sqlalchemy.orm import Session

from console.models import Intent
from console.store.sql_helpers import dialect_of
from console.vocabulary import LANES

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
