"""The alert_state rows: which conditions fire, and which webhook transitions are owed.

Firing, clearing and claiming a webhook are compare-and-set updates, so when
several processes evaluate at once exactly one of them wins each transition.
Functions that take a Session leave the commit to the caller; those that take
a session factory run and commit a transaction of their own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from console.store.sql import dialect_of, insert_for
from console.store.state_tables import AlertState

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
    values = dict(
        active=True,
        summary=summary,
        details=details,
        fired_at=now,
        cleared_at=None,
        webhook_due=FIRING,
        webhook_claimed_at=None,
    )
    if _insert_ignoring_conflict(session, dict(condition=key, **values)):
        return True
    flipped = session.execute(
        update(AlertState)
        .where(AlertState.condition == key, AlertState.active.is_(False))
        .values(**values)
    ).rowcount
    return flipped == 1


def _insert_ignoring_conflict(session: Session, values: dict[str, Any]) -> bool:
    """INSERT the row unless its condition exists; return whether it was inserted."""
    insert = insert_for(dialect_of(session))
    statement = (
        insert(AlertState)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["condition"])
        .returning(AlertState.condition)
    )
    return session.execute(statement).scalar_one_or_none() is not None


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
