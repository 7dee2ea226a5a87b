"""Intents, the outbox's rows: insert, look up, supersede, and one intent's story.

Every read and write of ``email_intent`` outside the send loop, the operators' actions and
the search (``intent_search``): the one statement ``enqueue`` runs, the lookup a repeated
enqueue returns, the cancellation ``outbox.supersede`` runs, the last attempt of each intent
on a page, and everything that happened to one intent (its page words it as a timeline,
``console.web.intent_story``). None of them commits.

The one statement that stores a new intent is idempotent, suppression-aware and wakes workers:
``INSERT ... SELECT ... ON CONFLICT (idempotency_key) DO NOTHING RETURNING`` decides the status
from the suppression list inside the same statement, so an enqueue is one round trip. On
PostgreSQL the statement also calls ``pg_notify``: the notification is delivered only when the
business transaction commits.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Collection
from typing import Any

from sqlalchemy import (
    bindparam,
    case,
    exists,
    func,
    literal,
    null,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.sql import Executable

from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression
from console.store.duplicate_sends import PossibleDuplicate, possible_duplicates_of
from console.store.suppressions import recipient_forms
from console.vocabulary import CANCELLED, DEAD, FAILED, PENDING, SUPPRESSED

NOTIFY_CHANNEL = "console_outbox"  # PostgreSQL LISTEN/NOTIFY channel of due mail
SUPPRESSED_REASON = "recipient is on the suppression list"
# Columns the caller supplies; status and status_reason are decided by the statement.
INSERTED_COLUMNS = (
    "idempotency_key", "message_id", "event", "recipient", "template", "template_version",
    "params", "lane", "purpose", "locale", "attempt_count", "next_attempt_at", "created_at",
    "updated_at", "expires_at", "recipient_account",
)  # fmt: skip


@functools.cache
def _statement(dialect: str) -> Executable:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    table = Intent.__table__
    forms = [bindparam("recipient_lower"), bindparam("recipient_hash")]  # hash: a forgotten one
    suppressed = exists().where(Suppression.recipient.in_(forms))
    values = [bindparam(name, type_=table.c[name].type) for name in INSERTED_COLUMNS]
    status = case((suppressed, literal(SUPPRESSED)), else_=literal(PENDING))
    reason = case((suppressed, literal(SUPPRESSED_REASON)), else_=null())
    source = select(*values, status, reason).where(true())  # WHERE: SQLite's ON CONFLICT parse
    inserted = (
        insert(table)
        .from_select([*INSERTED_COLUMNS, "status", "status_reason"], source)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(table.c.id, table.c.status, table.c.status_reason)
    )
    if dialect != "postgresql":
        return inserted
    rows = inserted.cte("inserted")
    return select(
        rows.c.id, rows.c.status, rows.c.status_reason, func.pg_notify(NOTIFY_CHANNEL, "")
    )


def wake_workers(session: Session) -> None:
    """Wake the workers of other processes when `session` commits: on PostgreSQL a NOTIFY on
    the channel they listen on; on SQLite they find the due mail at their next poll."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_notify(NOTIFY_CHANNEL, "")))


def insert_intent_once(session: Session, values: dict[str, Any]) -> Intent | None:
    """Insert the intent unless its key exists; return it, or None when the key was taken.

    A concurrent transaction inserting the same key makes this statement wait for
    it; if that one commits, nothing is inserted and None is returned.
    """
    statement = _statement(session.get_bind().dialect.name)
    forms = recipient_forms(values["recipient"])
    parameters = {**values, "recipient_lower": forms[0], "recipient_hash": forms[-1]}
    row = session.execute(statement, parameters).first()
    if row is None:
        return None
    intent = Intent(**_all_columns(values), id=row.id, status=row.status,
                    status_reason=row.status_reason)  # fmt: skip
    make_transient_to_detached(intent)
    session.add(intent)  # persistent without another statement: every column is known
    return intent


def _all_columns(values: dict[str, Any]) -> dict[str, Any]:
    """Every column of the new row: the given values, the rest NULL as inserted."""
    names = (column.key for column in Intent.__table__.columns)
    return {name: values.get(name) for name in names if name not in ("id", "status",
            "status_reason")}  # fmt: skip


def intent_by_key(session: Session, key: str) -> Intent | None:
    """Return the intent holding idempotency key `key`, or None."""
    query = select(Intent).where(Intent.idempotency_key == key)
    return session.execute(query).scalar_one_or_none()


# Not sent, and nobody is sending it: waiting, or stopped where an operator might requeue it.
SUPERSEDABLE_STATUSES = (PENDING, FAILED, DEAD)


def cancel_unsent(session: Session, key: str, reason: str, now: dt.datetime) -> bool:
    """Make the intent holding `key` cancelled with `reason` if it is supersedable.

    Return whether a row changed. Works in the caller's transaction and never
    commits; an Intent the session already holds shows the new status.
    """
    statement = (
        update(Intent)
        .where(Intent.idempotency_key == key, Intent.status.in_(SUPERSEDABLE_STATUSES))
        .values(status=CANCELLED, status_reason=reason, updated_at=now)
        .returning(Intent.id)
        .execution_options(synchronize_session="fetch")
    )
    return session.execute(statement).first() is not None


@dataclasses.dataclass(frozen=True)
class LastAttempt:
    intent_id: int
    attempt_number: int
    stage: str
    outcome: str | None  # None while the attempt is in progress
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    error: str | None


_COLUMNS = [getattr(Attempt, field.name) for field in dataclasses.fields(LastAttempt)]


def last_attempts(session: Session, intent_ids: Collection[int]) -> dict[int, LastAttempt]:
    """Return each intent's latest attempt by intent id (intents never tried are absent)."""
    if not intent_ids:
        return {}
    latest = (
        select(func.max(Attempt.id))
        .where(Attempt.intent_id.in_(intent_ids))
        .group_by(Attempt.intent_id)
    )
    query = select(*_COLUMNS).where(Attempt.id.in_(latest))
    return {row.intent_id: LastAttempt(*row) for row in session.execute(query)}


def attempt_number(session: Session, attempt_id: int) -> int | None:
    """Return the number an attempt has among its intent's (1 for the first), or None."""
    return session.scalar(select(Attempt.attempt_number).where(Attempt.id == attempt_id))


@dataclasses.dataclass(frozen=True)
class IntentStory:
    """One intent and everything that happened to it, each kind in its own order."""

    intent: Intent
    suppression: Suppression | None  # its recipient's entry on the suppression list
    attempts: list[Attempt]  # by id
    events: list[ProviderEvent]  # the provider events matched to it
    actions: list[AuditEntry]  # by id
    duplicates: list[PossibleDuplicate]  # by time


def intent_story(session: Session, intent_id: int) -> IntentStory | None:
    """Return the intent with its attempts, provider events, audit entries and suppression."""
    intent = session.get(Intent, intent_id)
    if intent is None:
        return None
    suppression = session.execute(
        select(Suppression).where(Suppression.recipient == intent.recipient.lower())
    ).scalar_one_or_none()
    attempts = session.execute(
        select(Attempt).where(Attempt.intent_id == intent_id).order_by(Attempt.id)
    ).scalars()
    events = session.execute(
        select(ProviderEvent).where(ProviderEvent.intent_id == intent_id)
    ).scalars()
    actions = session.execute(
        select(AuditEntry).where(AuditEntry.intent_id == intent_id).order_by(AuditEntry.id)
    ).scalars()
    return IntentStory(
        intent,
        suppression,
        list(attempts),
        list(events),
        list(actions),
        possible_duplicates_of(session, intent_id),
    )
