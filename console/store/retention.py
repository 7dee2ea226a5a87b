"""Retention: what is past its time scrubbed, trimmed, deleted, or its address replaced by a hash.

Finished intents lose their params, old provider events their payloads, old suppression notes
their text; finished mail past the horizon goes, with its attempts and provider events; old
audit entries name their address by its keyed hash (``console.store.address_redaction``, which
an erasure applies at once to one address). Each batch is found through a partial index that
holds only rows still to do and, on PostgreSQL, skips rows another process holds. Each batch
function takes a session factory and runs and commits one short transaction. The updates and
deletions repeat the finished-status condition, so an intent an operator requeued in the
meantime keeps all it has.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from sqlalchemy import Select, delete, null, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression
from console.store.address_redaction import AUDIT_COLUMNS, redacted, write_redacted
from console.store.sql_helpers import dialect_of
from console.vocabulary import TERMINAL_STATUSES

SessionFactory = Callable[[], Session]


def skip_locked(statement: Select, session: Session) -> Select:
    """On PostgreSQL, lock the rows `statement` selects, skipping those another process holds."""
    if dialect_of(session) == "postgresql":
        return statement.with_for_update(skip_locked=True)
    return statement


def scrub_finished_intents_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int, now: dt.datetime
) -> tuple[int, int]:
    """Scrub the params of up to `batch_size` finished intents created before `cutoff`; commits.

    Return how many intents were looked at and how many attempt replies trimmed.
    The UPDATE repeats the terminal-status condition, so an intent an operator
    requeued in the meantime keeps its params.
    """
    with session_factory() as session, session.begin():
        return _scrub_batch(session, cutoff, batch_size, now)


def _scrub_batch(
    session: Session, cutoff: dt.datetime, batch_size: int, now: dt.datetime
) -> tuple[int, int]:
    candidates = (
        select(Intent.id)
        .where(
            Intent.params_scrubbed_at.is_(None),
            Intent.created_at < cutoff,
            Intent.status.in_(TERMINAL_STATUSES),
        )
        .order_by(Intent.created_at)
        .limit(batch_size)
    )
    ids = session.execute(skip_locked(candidates, session)).scalars().all()
    if not ids:
        return 0, 0
    scrubbed = _scrub_params(session, ids, now)
    return len(ids), _trim_attempt_replies(session, scrubbed)


def _scrub_params(session: Session, ids: list[int], now: dt.datetime) -> list[int]:
    statement = (
        update(Intent)
        .where(Intent.id.in_(ids), Intent.status.in_(TERMINAL_STATUSES))
        .values(params=null(), params_scrubbed_at=now)
        .returning(Intent.id)
    )
    return list(session.execute(statement).scalars().all())


def _trim_attempt_replies(session: Session, intent_ids: list[int]) -> int:
    """Drop the reply texts of the attempts of `intent_ids`; return how many were trimmed."""
    statement = (
        update(Attempt)
        .where(Attempt.intent_id.in_(intent_ids), Attempt.reply_text.is_not(None))
        .values(reply_text=null())
    )
    return session.execute(statement).rowcount


def trim_event_payloads_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int
) -> int:
    """Drop the raw payload of up to `batch_size` events received before `cutoff`; commits."""
    with session_factory() as session, session.begin():
        return _trim_batch(session, cutoff, batch_size)


def _trim_batch(session: Session, cutoff: dt.datetime, batch_size: int) -> int:
    candidates = (
        select(ProviderEvent.id)
        .where(ProviderEvent.payload.is_not(None), ProviderEvent.received_at < cutoff)
        .order_by(ProviderEvent.received_at)
        .limit(batch_size)
    )
    ids = session.execute(skip_locked(candidates, session)).scalars().all()
    if not ids:
        return 0
    session.execute(update(ProviderEvent).where(ProviderEvent.id.in_(ids)).values(payload=null()))
    return len(ids)


def clear_suppression_notes_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int
) -> int:
    """Clear the free-text note of up to `batch_size` suppressions made before `cutoff`; commits.

    The suppression itself stays: it is what keeps mail from going out.
    """
    with session_factory() as session, session.begin():
        candidates = (
            select(Suppression.id)
            .where(Suppression.note.is_not(None), Suppression.created_at < cutoff)
            .order_by(Suppression.id)
            .limit(batch_size)
        )
        ids = session.execute(skip_locked(candidates, session)).scalars().all()
        if ids:
            session.execute(update(Suppression).where(Suppression.id.in_(ids)).values(note=null()))
        return len(ids)


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


ACCOUNT_ACTION_PREFIX = "user_"  # the target of these actions is an operator account


def hash_old_audit_targets_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int, secret_key: str
) -> int:
    """Replace the target address of up to `batch_size` entries made before `cutoff`; commits.

    Entries whose target is an operator account (``user_*`` actions) are left as
    they are. Return how many entries were rewritten.
    """
    with session_factory() as session, session.begin():
        candidates = (
            select(*AUDIT_COLUMNS)
            .where(
                AuditEntry.created_at < cutoff,
                AuditEntry.target.contains("@"),
                ~AuditEntry.action.startswith(ACCOUNT_ACTION_PREFIX, autoescape=True),
            )
            .order_by(AuditEntry.id)
            .limit(batch_size)
        )
        rows = session.execute(skip_locked(candidates, session)).all()
        values = []
        for row in rows:
            address = row.target.strip().lower()
            values.append(redacted(row, address, address_hash(secret_key, address)))
        write_redacted(session, values)
        return len(rows)
