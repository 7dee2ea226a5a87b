"""Addresses in the audit log and the suppression notes replaced by their keyed hash.

The retention pass does it to audit entries older than ``CONSOLE_RETENTION_DAYS``;
an erasure (``console forget``) does it at once to every entry naming one
address. An entry keeps who, what and when: only the address changes, in its
target and wherever its reason or details quote it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy import Text, cast, func, or_, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash, replace_address, replace_address_in
from console.models import AuditEntry, Suppression
from console.store.retention_sweeps import skip_locked

SessionFactory = Callable[[], Session]
ACCOUNT_ACTION_PREFIX = "user_"  # the target of these actions is an operator account
_AUDIT_COLUMNS = (AuditEntry.id, AuditEntry.target, AuditEntry.reason, AuditEntry.details)


def mentions(column: Any, address: str) -> Any:
    """SQL: `column` (text or JSON) contains `address` in any letter case."""
    return func.lower(cast(column, Text)).contains(address.lower(), autoescape=True)


def _redacted(row: Any, address: str, token: str) -> dict[str, Any]:
    target = row.target
    if target is not None and target.strip().lower() == address:
        target = token
    return dict(
        id=row.id,
        target=replace_address(target, address, token),
        reason=replace_address(row.reason, address, token),
        details=replace_address_in(row.details, address, token),
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
    naming = select(*_AUDIT_COLUMNS).where(
        or_(
            func.lower(AuditEntry.target) == address,
            mentions(AuditEntry.reason, address),
            mentions(AuditEntry.details, address),
        )
    )
    rows = session.execute(naming).all()
    _write(session, [_redacted(row, address, token) for row in rows])
    return len(rows)


def redact_suppression_notes(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the notes of other suppressions; never commits."""
    rows = session.execute(
        select(Suppression.id, Suppression.note).where(mentions(Suppression.note, address))
    ).all()
    values = [dict(id=row.id, note=replace_address(row.note, address, token)) for row in rows]
    if values:
        session.execute(update(Suppression), values)
    return len(values)
