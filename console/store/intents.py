"""Intents, the outbox's rows: insert, look up, supersede, and one intent's story.

Every read and write of ``email_intent`` outside the send loop, the operators' actions and
the search (``intent_search``): the one statement ``enqueue`` runs, the lookup a repeated
enqueue returns, the cancellation ``outbox.supersede`` runs, the last attempt of each intent
on a page, and the timeline of one intent. None of them commits.
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
from console.store.duplicate_sends import possible_duplicates_of, timeline_fact
from console.store.suppressions import recipient_forms
from console.vocabulary import CANCELLED, DEAD, FAILED, PENDING, SUPPRESSED

# Insert ------------------------------------------------------------------------------------------
#
# The one statement that stores a new intent: idempotent, suppression-aware, waking workers.
#
# ``INSERT ... SELECT ... ON CONFLICT (idempotency_key) DO NOTHING RETURNING`` decides the status
# from the suppression list inside the same statement, so an enqueue is one round trip. On
# PostgreSQL the statement also calls ``pg_notify``: the notification is delivered only when the
# business transaction commits.

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


# Lookup by key -----------------------------------------------------------------------------------
#
# Read one intent by its idempotency key: the row a repeated enqueue returns.


def intent_by_key(session: Session, key: str) -> Intent | None:
    """Return the intent holding idempotency key `key`, or None."""
    query = select(Intent).where(Intent.idempotency_key == key)
    return session.execute(query).scalar_one_or_none()


# Supersede ---------------------------------------------------------------------------------------
#
# Cancel an intent not sent yet, by its key: the statement ``outbox.supersede`` runs.

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


# Last attempts -----------------------------------------------------------------------------------
#
# The last attempt of each intent on a page of results: its outcome, code and reply.


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


# Timeline ----------------------------------------------------------------------------------------
#
# One intent's story in time order: its event, attempts, provider events, operator actions.


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    at: dt.datetime
    kind: str  # created | attempt | provider_event | suppression | operator | duplicate
    title: str
    facts: list[tuple[str, Any]]  # label -> value, only the present ones
    actor: str | None = None
    event_id: int | None = None  # a provider event's own page


@dataclasses.dataclass(frozen=True)
class IntentDetail:
    intent: Intent
    timeline: list[TimelineEntry]
    suppression: Suppression | None
    attempt_count: int


def intent_detail(session: Session, intent_id: int) -> IntentDetail | None:
    """Return the intent and its whole story in time order, or None when unknown."""
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
    timeline = [_created_entry(intent)]
    attempt_entries = [_attempt_entry(attempt) for attempt in attempts]
    timeline += attempt_entries
    timeline += [_provider_event_entry(event) for event in events]
    timeline += [_operator_entry(entry) for entry in actions]
    timeline += _suppression_entries(intent, suppression)
    timeline += [_duplicate_entry(d) for d in possible_duplicates_of(session, intent_id)]
    timeline.sort(key=lambda entry: entry.at)
    return IntentDetail(intent, timeline, suppression, len(attempt_entries))


def _facts(*pairs: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [(label, value) for label, value in pairs if value not in (None, "")]


def _created_entry(intent: Intent) -> TimelineEntry:
    title = f"Business event {intent.event}" if intent.event else "Enqueued"
    facts = _facts(
        ("key", intent.idempotency_key),
        ("template", f"{intent.template}@{intent.template_version}"),
        ("lane", intent.lane),
        ("purpose", intent.purpose),
        ("expires", intent.expires_at),
    )
    return TimelineEntry(intent.created_at, "created", title, facts)


def _attempt_entry(attempt: Attempt) -> TimelineEntry:
    outcome = attempt.outcome or f"in progress ({attempt.stage})"
    facts = _facts(
        ("code", attempt.reply_code),
        ("enhanced status", attempt.enhanced_status),
        ("reply", attempt.reply_text),
        ("error", attempt.error),
        ("provider id", attempt.provider_message_id),
        ("stage reached", attempt.stage),
        ("duration", f"{attempt.duration_ms} ms" if attempt.duration_ms is not None else None),
        ("worker", attempt.worker_id),
    )
    title = f"Attempt {attempt.attempt_number}: {outcome}"
    return TimelineEntry(attempt.started_at, "attempt", title, facts, actor=attempt.worker_id)


def _provider_event_entry(event: ProviderEvent) -> TimelineEntry:
    kind = f"{event.event_type} ({event.bounce_type})" if event.bounce_type else event.event_type
    facts = _facts(
        ("source", event.source),
        ("recipient", event.recipient),
        ("diagnostic", event.diagnostic),
        ("provider id", event.provider_message_id),
        ("received", event.received_at),
    )
    at = event.occurred_at or event.received_at
    title = f"Provider: {kind}"
    return TimelineEntry(at, "provider_event", title, facts, actor=event.source, event_id=event.id)


def _operator_entry(entry: AuditEntry) -> TimelineEntry:
    change = (
        f"{entry.before_status} → {entry.after_status}"
        if entry.before_status != entry.after_status
        else None
    )
    details = entry.details or {}
    facts = _facts(
        ("status", change),
        ("reason", entry.reason),
        *((str(key).replace("_", " "), value) for key, value in sorted(details.items())),
    )
    title = f"Operator: {entry.action.replace('_', ' ')}"
    return TimelineEntry(entry.created_at, "operator", title, facts, actor=entry.actor)


def _suppression_entries(intent: Intent, suppression: Suppression | None) -> list[TimelineEntry]:
    entries = []
    if suppression is not None:
        facts = _facts(("reason", suppression.reason), ("note", suppression.note))
        entries.append(
            TimelineEntry(
                suppression.created_at,
                "suppression",
                f"Recipient {suppression.recipient} suppressed",
                facts,
                actor=suppression.created_by,
            )
        )
    if intent.status == "suppressed":
        at = intent.updated_at or intent.created_at
        facts = _facts(("reason", intent.status_reason))
        entries.append(TimelineEntry(at, "suppression", "Held back: suppressed", facts))
    return entries


def _duplicate_entry(duplicate) -> TimelineEntry:
    title, facts = timeline_fact(duplicate)
    return TimelineEntry(duplicate.at, "duplicate", title, _facts(*facts))
