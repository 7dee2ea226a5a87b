"""The reads behind each alert condition: small counts on indexed columns, no writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Attempt, Intent
from console.store.state_tables import LaneBreaker
from console.vocabulary import AMBIGUOUS, DEAD, PENDING


def _changed_at():
    return func.coalesce(Intent.updated_at, Intent.created_at)


def count_dead_since(session: Session, since: dt.datetime) -> tuple[int, int | None]:
    """Count intents dead-lettered since `since`; return (count, newest intent id)."""
    query = select(func.count(), func.max(Intent.id)).where(
        Intent.status == DEAD, _changed_at() >= since
    )
    count, newest = session.execute(query).one()
    return count, newest


def count_ambiguous_before(session: Session, before: dt.datetime) -> tuple[int, dt.datetime | None]:
    """Count intents ambiguous since before `before`; return (count, oldest change)."""
    query = select(func.count(), func.min(_changed_at())).where(
        Intent.status == AMBIGUOUS, _changed_at() < before
    )
    count, oldest = session.execute(query).one()
    return count, oldest


def oldest_pending_by_template(
    session: Session, created_before: dt.datetime
) -> list[tuple[str, str, dt.datetime]]:
    """Return (template, lane, oldest created_at) of the pending intents created before a time.

    Only intents older than `created_before` are read: an index range.
    """
    query = (
        select(Intent.template, Intent.lane, func.min(Intent.created_at))
        .where(Intent.status == PENDING, Intent.created_at < created_before)
        .group_by(Intent.template, Intent.lane)
    )
    return [(template, lane, oldest) for template, lane, oldest in session.execute(query)]


def held_back_lanes(session: Session) -> list[tuple[str, str, float | None]]:
    """Return (lane, state, failure rate) of each lane breaker that is not closed."""
    query = select(LaneBreaker.lane, LaneBreaker.state, LaneBreaker.failure_rate).where(
        LaneBreaker.state != "closed"
    )
    return [(lane, state, rate) for lane, state, rate in session.execute(query)]


def count_replies_since(
    session: Session, since: dt.datetime, codes: Iterable[int]
) -> tuple[int, int | None]:
    """Count attempts since `since` answered with one of `codes`; return (count, top code)."""
    query = select(func.count(), func.max(Attempt.reply_code)).where(
        Attempt.started_at >= since, Attempt.reply_code.in_(list(codes))
    )
    count, code = session.execute(query).one()
    return count, code
