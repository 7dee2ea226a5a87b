"""Addresses in the audit log, the suppression notes and the holds replaced by their keyed hash.

The retention pass does it to audit entries older than ``CONSOLE_RETENTION_DAYS``;
an erasure (``console forget``) does it at once to every entry naming one
address. An entry keeps who, what and when: only the address changes, in its
target and wherever its reason or details quote it.

An address is found in any letter case and in each form text holds it in
(``written_forms``): plain, URL-encoded (a search's query string in an export's
target) and JSON-escaped (``\\u0040``, non-ASCII letters as their ``\\u`` escapes).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import Text, cast, delete, func, or_, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash, replace_address, replace_address_in
from console.models import AuditEntry, Suppression
from console.store.retention_sweeps import skip_locked
from console.store.state_tables import IntentHold, LoginFailureCount

SessionFactory = Callable[[], Session]
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
    rows = session.execute(
        select(Suppression.id, Suppression.note).where(mentions(Suppression.note, address))
    ).all()
    values = [dict(id=row.id, note=replace_forms(row.note, address, token)) for row in rows]
    if values:
        session.execute(update(Suppression), values)
    return len(values)


def redact_hold_reasons(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the reasons of holds; never commits."""
    rows = session.execute(
        select(IntentHold.id, IntentHold.reason).where(mentions(IntentHold.reason, address))
    ).all()
    values = [dict(id=row.id, reason=replace_forms(row.reason, address, token)) for row in rows]
    if values:
        session.execute(update(IntentHold), values)
    return len(values)


def forget_login_failures(session: Session, address: str) -> int:
    """Delete the failed-login counts of usernames that name `address`; never commits.

    The count of each client address (username "") stays.
    """
    statement = delete(LoginFailureCount).where(
        LoginFailureCount.username != "", mentions(LoginFailureCount.username, address)
    )
    return session.execute(statement, execution_options={"synchronize_session": False}).rowcount
