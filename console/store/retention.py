"""Retention: what is past its time scrubbed, trimmed, deleted, or its address replaced by a hash.

Each batch function takes a session factory and runs and commits one short transaction,
found through an index and, on PostgreSQL, skipping rows another process holds. The address
redaction is shared with an erasure, which applies it at once to one address.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import Select, Text, cast, delete, func, null, or_, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash, replace_address, replace_address_in
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression
from console.state_tables import IntentHold, LoginFailureCount
from console.store.statements import dialect_of
from console.vocabulary import TERMINAL_STATUSES

# Sweeps ------------------------------------------------------------------------------------------
#
# Retention's writes: scrub finished intents, trim old provider events, clear old suppression
# notes, a batch at a time (the deletions follow).
#
# Each batch is found through a partial index that holds only rows still to do and, on PostgreSQL,
# skips rows another process holds. Each batch function takes a session factory and runs and
# commits one short transaction.

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


# Deletions ---------------------------------------------------------------------------------------
#
# Retention's deletions: finished mail past the horizon, with its attempts and provider events.
#
# Each batch function takes a session factory and runs and commits one short transaction; on
# PostgreSQL it skips rows another process holds. The deletions repeat the finished-status
# condition, so an intent an operator requeued in the meantime stays with all it has.


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


# Address redaction -------------------------------------------------------------------------------
#
# Addresses in the audit log, the suppression notes and the holds replaced by their keyed hash.
#
# The retention pass does it to audit entries older than ``CONSOLE_RETENTION_DAYS``; an erasure
# (``console forget``) does it at once to every entry naming one address. An entry keeps who, what
# and when: only the address changes, in its target and wherever its reason or details quote it.
#
# An address is found in any letter case and in each form text holds it in (``written_forms``):
# plain, URL-encoded (a search's query string in an export's target) and JSON-escaped (``\u0040``,
# non-ASCII letters as their ``\u`` escapes).

ACCOUNT_ACTION_PREFIX = "user_"  # the target of these actions is an operator account
_AUDIT_COLUMNS = (AuditEntry.id, AuditEntry.target, AuditEntry.reason, AuditEntry.details)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _encoded(address: str) -> set[str]:
    escaped = json.dumps(address)[1:-1]
    return {
        address,
        address.replace("@", "%40"),
        quote(address, safe=""),
        quote(address),
        quote_plus(address),
        escaped,
        escaped.replace("@", "\\u0040"),
    }


def written_forms(address: str) -> tuple[str, ...]:
    """`address` as text may hold it, ASCII letters lower-cased, longest first.

    Its non-ASCII letters come lower-cased and upper-cased too: SQLite's ``lower``
    folds ASCII letters only.
    """
    plain = address.strip().lower()
    upper = "".join(c.upper() if ord(c) > 127 else c for c in plain)
    forms = {_ascii_lower(form) for variant in {plain, upper} for form in _encoded(variant)}
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def mentions(column: Any, address: str) -> Any:
    """SQL: `column` (text or JSON) contains `address`, in any letter case and written form."""
    text = func.lower(cast(column, Text))
    return or_(*(text.contains(form, autoescape=True) for form in written_forms(address)))


def replace_forms(text: str | None, address: str, token: str) -> str | None:
    """`text` with `address`, in any letter case and written form, replaced by `token`."""
    for form in written_forms(address):
        text = replace_address(text, form, token)
    return text


def replace_forms_in(value: Any, address: str, token: str) -> Any:
    """A JSON-like `value` with `address` in every form replaced by `token`, keys too."""
    for form in written_forms(address):
        value = replace_address_in(value, form, token)
    return value


def audit_naming(address: str) -> Any:
    """SQL: the audit entry names `address` in its target, reason or details."""
    return or_(
        mentions(AuditEntry.target, address),
        mentions(AuditEntry.reason, address),
        mentions(AuditEntry.details, address),
    )


def _redacted(row: Any, address: str, token: str) -> dict[str, Any]:
    target = row.target
    if target is not None and target.strip().lower() == address:
        target = token
    return dict(
        id=row.id,
        target=replace_forms(target, address, token),
        reason=replace_forms(row.reason, address, token),
        details=replace_forms_in(row.details, address, token),
    )


def _write(session: Session, values: list[dict[str, Any]]) -> None:
    if values:
        session.execute(update(AuditEntry), values)  # by primary key, one statement per row


def hash_old_audit_targets_batch(
    session_factory: SessionFactory, cutoff: dt.datetime, batch_size: int, secret_key: str
) -> int:
    """Replace the target address of up to `batch_size` entries made before `cutoff`; commits.

    Entries whose target is an operator account (``user_*`` actions) are left as
    they are. Return how many entries were rewritten.
    """
    with session_factory() as session, session.begin():
        candidates = (
            select(*_AUDIT_COLUMNS)
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
            values.append(_redacted(row, address, address_hash(secret_key, address)))
        _write(session, values)
        return len(rows)


def redact_audit_entries(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in every audit entry naming it; never commits.

    Return how many entries changed.
    """
    rows = session.execute(select(*_AUDIT_COLUMNS).where(audit_naming(address))).all()
    _write(session, [_redacted(row, address, token) for row in rows])
    return len(rows)


def redact_suppression_notes(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the notes of other suppressions; never commits."""
    return _redact_text_column(session, Suppression, "note", address, token)


def redact_hold_reasons(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the reasons of holds; never commits."""
    return _redact_text_column(session, IntentHold, "reason", address, token)


def _redact_text_column(session: Session, model, name: str, address: str, token: str) -> int:
    """Replace `address` by `token` in column `name` of `model`'s rows; how many changed."""
    column = getattr(model, name)
    rows = session.execute(select(model.id, column).where(mentions(column, address))).all()
    values = [{"id": row.id, name: replace_forms(row[1], address, token)} for row in rows]
    if values:
        session.execute(update(model), values)
    return len(values)


def forget_login_failures(session: Session, address: str) -> int:
    """Delete the failed-login counts of usernames that name `address`; never commits.

    The count of each client address (username "") stays.
    """
    statement = delete(LoginFailureCount).where(
        LoginFailureCount.username != "", mentions(LoginFailureCount.username, address)
    )
    return session.execute(statement, execution_options={"synchronize_session": False}).rowcount
