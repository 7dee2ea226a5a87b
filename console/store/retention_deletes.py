"""Retention's deletions: finished mail past the horizon, with its attempts and provider events.

Each batch function takes a session factory and runs and commits one short
transaction; on PostgreSQL it skips rows another process holds. The deletions
repeat the finished-status condition, so an intent an operator requeued in the
meantime stays with all it has.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from console.models import Attempt, Intent, ProviderEvent
from console.store.retention_sweeps import skip_locked
from console.vocabulary import TERMINAL_STATUSES

SessionFactory = Callable[[], Session]


def delete_finished_intents(session: Session, ids: Sequence[int]) -> list[int]:
    """Delete those of `ids` that are finished, their attempts and provider events; never commits.

    Return the ids deleted. Audit entries stay (their intent id becomes NULL);
    suppressions made from a deleted attempt or event lose only that link.
    """
    if not ids:
        return []
    finished = select(Intent.id).where(Intent.id.in_(ids), Intent.status.in_(TERMINAL_STATUSES))
    unsynchronized = {"synchronize_session": False}
    session.execute(
        delete(ProviderEvent).where(ProviderEvent.intent_id.in_(finished)),
        execution_options=unsynchronized,
    )
    session.execute(
        delete(Attempt).where(Attempt.intent_id.in_(finished)), execution_options=unsynchronized
    )
    deleted = session.execute(
        delete(Intent)
        .where(Intent.id.in_(ids), Intent.status.in_(TERMINAL_STATUSES))
        .returning(Intent.id),
        execution_options=unsynchronized,
    )
    return list(deleted.scalars())


def delete_finished_intents_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int
) -> tuple[int, int]:
    """Delete up to `batch_size` finished intents created before `cutoff`; commits.

    Return how many were looked at and how many deleted.
    """
    with session_factory() as session, session.begin():
        candidates = (
            select(Intent.id)
            .where(Intent.created_at < cutoff, Intent.status.in_(TERMINAL_STATUSES))
            .order_by(Intent.created_at)
            .limit(batch_size)
        )
        ids = session.execute(skip_locked(candidates, session)).scalars().all()
        return len(ids), len(delete_finished_intents(session, ids))


def delete_unmatched_events_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int
) -> int:
    """Delete up to `batch_size` events with no intent, received before `cutoff`; commits."""
    with session_factory() as session, session.begin():
        candidates = (
            select(ProviderEvent.id)
            .where(ProviderEvent.intent_id.is_(None), ProviderEvent.received_at < cutoff)
            .order_by(ProviderEvent.received_at)
            .limit(batch_size)
        )
        ids = session.execute(skip_locked(candidates, session)).scalars().all()
        if ids:
            session.execute(
                delete(ProviderEvent).where(ProviderEvent.id.in_(ids)),
                execution_options={"synchronize_session": False},
            )
        return len(ids)
