"""Alerts: the reads behind each condition, and the alert_state rows that say which fire.

The reads behind the conditions are small counts on indexed columns, with no writes. The
alert_state rows say which conditions fire and which webhook transitions are owed: firing,
clearing and claiming a webhook are compare-and-set updates, so when several processes evaluate
at once exactly one of them wins each transition. Functions that take a Session leave the commit
to the caller; those that take a session factory run and commit a transaction of their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from console.models import Attempt, Intent
from console.state_tables import AlertState, LaneBreaker
from console.store.sql_helpers import insert_on_conflict
from console.vocabulary import AMBIGUOUS, DEAD, PENDING

_INSERT_ALERT = insert_on_conflict(
    AlertState.__table__,
    [
        "condition",
        "active",
        "summary",
        "details",
        "fired_at",
        "cleared_at",
        "webhook_due",
        "webhook_claimed_at",
    ],
    "condition",
    returning="condition",
)


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


FIRING, RESOLVED = "firing", "resolved"  # webhook_due: the transition the webhook is owed


def load_active_alert_keys(session: Session) -> set[str]:
    """Return the conditions marked active."""
    query = select(AlertState.condition).where(AlertState.active.is_(True))
    return set(session.execute(query).scalars())


def load_firing_alerts(session: Session) -> list[AlertState]:
    """Return the conditions firing now, oldest first (for the dashboard's banner)."""
    query = select(AlertState).where(AlertState.active.is_(True)).order_by(AlertState.fired_at)
    return list(session.execute(query).scalars())


def mark_alert_firing(
    session: Session, key: str, summary: str, details: dict[str, Any], now: dt.datetime
) -> bool:
    """Mark condition `key` active unless it already is; return whether this call did it."""
    values = firing_values(summary, details, now)
    if _insert_ignoring_conflict(session, dict(condition=key, **values)):
        return True
    flipped = session.execute(
        update(AlertState)
        .where(AlertState.condition == key, AlertState.active.is_(False))
        .values(**values)
    ).rowcount
    return flipped == 1


def firing_values(summary: str, details: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """An alert's row as it fires at `now` (its condition aside)."""
    return dict(
        active=True,
        summary=summary,
        details=details,
        fired_at=now,
        cleared_at=None,
        webhook_due=FIRING,
        webhook_claimed_at=None,
    )


def _insert_ignoring_conflict(session: Session, values: dict[str, Any]) -> bool:
    """INSERT the row unless its condition exists; return whether it was inserted."""
    return session.execute(_INSERT_ALERT, values).scalar_one_or_none() is not None


def mark_alert_cleared(session: Session, key: str, now: dt.datetime) -> bool:
    """Mark condition `key` cleared if it is active; return whether this call did it."""
    flipped = session.execute(
        update(AlertState)
        .where(AlertState.condition == key, AlertState.active.is_(True))
        .values(active=False, cleared_at=now, webhook_due=RESOLVED, webhook_claimed_at=None)
    ).rowcount
    return flipped == 1


SessionFactory = Callable[[], Session]


def load_alerts_owing_webhook(session_factory: SessionFactory) -> list[AlertState]:
    """Return the rows whose last transition the webhook has not been told (reads only)."""
    with session_factory() as session:
        query = select(AlertState).where(AlertState.webhook_due.is_not(None))
        return list(session.execute(query).scalars().all())


def claim_alert_webhook(
    session_factory: SessionFactory,
    key: str,
    due: str,
    now: dt.datetime,
    stale_before: dt.datetime,
) -> bool:
    """Claim telling the webhook of `key`'s `due` transition; commits; return whether won.

    A claim older than `stale_before` (its sender failed or died) may be taken again.
    """
    claim = (
        update(AlertState)
        .where(
            AlertState.condition == key,
            AlertState.webhook_due == due,
            or_(
                AlertState.webhook_claimed_at.is_(None),
                AlertState.webhook_claimed_at < stale_before,
            ),
        )
        .values(webhook_claimed_at=now)
    )
    with session_factory() as session, session.begin():
        return session.execute(claim).rowcount == 1


def mark_alert_notified(
    session_factory: SessionFactory, key: str, due: str, sent_at: dt.datetime
) -> None:
    """Record that the webhook was told of `key`'s `due` transition; commits."""
    statement = (
        update(AlertState)
        .where(and_(AlertState.condition == key, AlertState.webhook_due == due))
        .values(webhook_due=None, webhook_sent_at=sent_at)
    )
    with session_factory() as session, session.begin():
        session.execute(statement)
