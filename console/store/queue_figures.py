"""The queue's figures that the dashboard, /metrics and /healthz each read.

Counts by status and lane, the oldest pending intent per lane and the workers' last ticks, plus
the other figures /metrics shows (suppressions, recent provider events, lane breakers). Every
query is a grouped count or an aggregate over an indexed range; none of them commits.

The workers' last ticks are read from ``console.store.heartbeats``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from console.models import Intent, ProviderEvent, Suppression
from console.state_tables import LaneBreaker
from console.store.sql_helpers import dialect_of
from console.vocabulary import LANES, PENDING, SUBMITTED

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
