"""The audit log: the entries operator actions write, and their list newest first."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from console.models import AuditEntry
from console.store.sql_helpers import PAGE_SIZE


def audit_values(
    *,
    actor: str,
    action: str,
    now: dt.datetime,
    reason: str | None = None,
    intent_id: int | None = None,
    target: str | None = None,
    before: str | None = None,
    after: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The values of one audit_entry row: who did what, when, why, and the status change."""
    return dict(
        actor=actor,
        action=action,
        intent_id=intent_id,
        target=target,
        reason=reason,
        before_status=before,
        after_status=after,
        details=details or None,
        created_at=now,
    )


def write_audit(session: Session, rows: list[dict[str, Any]]) -> None:
    """Insert the audit entries `rows` (values from audit_values) in one statement."""
    if rows:
        session.execute(insert(AuditEntry), rows)


@dataclasses.dataclass(frozen=True)
class AuditFilters:
    """What the audit list is narrowed to; every field optional. Dates are UTC, `to` inclusive."""

    actor: str | None = None
    action: str | None = None
    intent_id: int | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None

    def conditions(self) -> list[Any]:
        found: list[Any] = []
        if self.actor:
            found.append(AuditEntry.actor == self.actor)
        if self.action:
            found.append(AuditEntry.action == self.action)
        if self.intent_id is not None:
            found.append(AuditEntry.intent_id == self.intent_id)
        if self.date_from is not None:
            found.append(AuditEntry.created_at >= _midnight(self.date_from))
        if self.date_to is not None:
            found.append(AuditEntry.created_at < _midnight(self.date_to + dt.timedelta(days=1)))
        return found


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry]
    next_before: int | None


def audit_page(
    session: Session,
    *,
    before: int | None = None,
    filters: AuditFilters | None = None,
    limit: int | None = None,
) -> AuditPage:
    """Return audit entries matching `filters`, newest first, keyset-paginated by id."""
    limit = limit or PAGE_SIZE
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit + 1)
    if filters is not None:
        query = query.where(*filters.conditions())
    if before is not None:
        query = query.where(AuditEntry.id < before)
    entries = list(session.execute(query).scalars())
    next_before = entries[limit - 1].id if len(entries) > limit else None
    return AuditPage(entries[:limit], next_before)
