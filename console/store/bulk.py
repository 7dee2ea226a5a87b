"""Bulk actions over a filtered list: a preview of their effect, then the confirmed action."""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.core.plurals import plural
from console.models import AuditEntry, Intent, Suppression, utcnow
from console.store.actions import ActionRefused, apply_in_chunks, due_now_values, required_reason
from console.store.search_filters import SearchFilters
from console.vocabulary import (
    DEAD,
    PENDING,
    REQUEUEABLE_STATUSES,
    SENDING,
    SUBMITTED,
    SUPPRESSED,
)

BULK_LIMIT = 10_000
BULK_ACTIONS = {"requeue": REQUEUEABLE_STATUSES, "dead_letter": (PENDING,)}
_SKIP_WORDS = {
    SUBMITTED: "already submitted",
    PENDING: "already pending",
    SENDING: "being sent",
    SUPPRESSED: "held back by a suppression",
    DEAD: "already dead",
}


@dataclasses.dataclass(frozen=True)
class BulkPreview:
    """What a bulk action over a filtered list would do, computed before it acts."""

    action: str
    filters: SearchFilters
    matched: int
    eligible: int  # in an allowed status and not skipped
    suppressed_skipped: int
    skipped_by_status: dict[str, int]
    max_id: int
    previewed_at: dt.datetime
    limit: int = BULK_LIMIT
    scrubbed_skipped: int = 0  # params removed by retention: nothing left to render
    expired_skipped: int = 0  # past the expires_at their application set: no longer wanted

    @property
    def will_act(self) -> int:
        return min(self.eligible, self.limit)

    def summary(self) -> str:
        """Say the effect in one line: "requeues 412; 9 suppressed recipients skipped; ..."."""
        verb = {"requeue": "requeues", "dead_letter": "dead-letters"}[self.action]
        parts = [f"{verb} {self.will_act}"]
        if self.eligible > self.limit:
            parts.append(f"{self.eligible - self.limit} more left for another run")
        if self.suppressed_skipped:
            recipients = plural(self.suppressed_skipped, "suppressed recipient")
            parts.append(f"{recipients} skipped")
        if self.scrubbed_skipped:
            parts.append(f"{self.scrubbed_skipped} with params removed by retention skipped")
        if self.expired_skipped:
            parts.append(f"{self.expired_skipped} past their expiry skipped")
        for status, count in sorted(self.skipped_by_status.items()):
            parts.append(f"{count} {_SKIP_WORDS.get(status, status)}")
        return "; ".join(parts)


_SCRUBBED = Intent.params_scrubbed_at.is_not(None)


def _past_expiry(at: dt.datetime) -> Any:
    """Intents whose application-set expiry has passed at `at`: requeue keeps it, so skips them."""
    return Intent.expires_at.is_not(None) & (Intent.expires_at <= at)


def _bulk_conditions(
    session: Session, filters: SearchFilters, action: str, at: dt.datetime
) -> tuple[list[Any], Any]:
    if action not in BULK_ACTIONS:
        raise ActionRefused(f"unknown bulk action {action!r}")
    conditions = filters.conditions(session.get_bind().dialect.name, at)
    suppressed = (
        select(Suppression.id).where(Suppression.recipient == func.lower(Intent.recipient)).exists()
    )
    return conditions, suppressed


def preview_bulk(
    session: Session, filters: SearchFilters, action: str, *, now: dt.datetime | None = None
) -> BulkPreview:
    """Count what `action` would do to the intents `filters` match, changing nothing."""
    now = now or utcnow()
    conditions, suppressed = _bulk_conditions(session, filters, action, now)
    allowed = BULK_ACTIONS[action]
    max_id = session.execute(select(func.coalesce(func.max(Intent.id), 0))).scalar_one()
    by_status = dict(
        session.execute(
            select(Intent.status, func.count())
            .where(*conditions, Intent.id <= max_id)
            .group_by(Intent.status)
        ).all()
    )
    suppressed_skipped = scrubbed_skipped = expired_skipped = 0
    if action == "requeue":
        in_scope = (*conditions, Intent.id <= max_id, Intent.status.in_(allowed))
        suppressed_skipped = session.execute(
            select(func.count()).where(*in_scope, suppressed)
        ).scalar_one()
        scrubbed_skipped = session.execute(
            select(func.count()).where(*in_scope, ~suppressed, _SCRUBBED)
        ).scalar_one()
        expired_skipped = session.execute(
            select(func.count()).where(*in_scope, ~suppressed, ~_SCRUBBED, _past_expiry(now))
        ).scalar_one()
    in_allowed = sum(count for status, count in by_status.items() if status in allowed)
    return BulkPreview(
        action=action,
        filters=filters,
        matched=sum(by_status.values()),
        eligible=in_allowed - suppressed_skipped - scrubbed_skipped - expired_skipped,
        suppressed_skipped=suppressed_skipped,
        scrubbed_skipped=scrubbed_skipped,
        expired_skipped=expired_skipped,
        skipped_by_status={s: c for s, c in by_status.items() if s not in allowed},
        max_id=max_id,
        previewed_at=now,
    )


def apply_bulk(
    session: Session,
    filters: SearchFilters,
    action: str,
    *,
    actor: str,
    reason: str,
    max_id: int,
    previewed_at: dt.datetime,
    now: dt.datetime | None = None,
    limit: int = BULK_LIMIT,
    preview_id: str | None = None,
) -> int:
    """Do what the confirmed preview said, to intents unchanged since; return how many.

    Only intents that existed at the preview (id <= max_id) and were not updated
    after it are touched, so submitting the same confirmation twice acts once.
    `preview_id` (the one-use id of the preview) goes into each audit entry, so
    ``confirmation_of`` finds that the preview was used.
    """
    now = now or utcnow()
    reason = required_reason(reason)
    conditions, suppressed = _bulk_conditions(session, filters, action, previewed_at)
    allowed = BULK_ACTIONS[action]
    query = select(Intent.id, Intent.status, Intent.recipient).where(
        *conditions,
        Intent.id <= max_id,
        Intent.status.in_(allowed),
        (Intent.updated_at.is_(None)) | (Intent.updated_at <= previewed_at),
    )
    if action == "requeue":
        query = query.where(~suppressed, ~_SCRUBBED, ~_past_expiry(now))
    targets: dict[str, list[tuple[int, str]]] = {}
    for row in session.execute(query.order_by(Intent.id).limit(limit)):
        targets.setdefault(row.status, []).append((row.id, row.recipient))
    if action == "requeue":
        values = {status: due_now_values(now, f"requeued by {actor}") for status in targets}
    else:
        values = {PENDING: dict(status=DEAD, status_reason=f"dead-lettered by {actor}")}
    return apply_in_chunks(
        session,
        targets,
        action=action,
        values_by_status=values,
        actor=actor,
        reason=reason,
        now=now,
        not_changed_since=previewed_at,
        details={"bulk": True, "preview": preview_id} if preview_id else {"bulk": True},
    )


# -- the one-use preview: its id rides in the confirmation and in the audit entries ------

PREVIEW_ID_MAX_LENGTH = 64


def new_preview_id() -> str:
    """A fresh id for one bulk preview (the search page puts one in each bulk link)."""
    return secrets.token_urlsafe(12)


def valid_preview_id(value: str) -> bool:
    return 0 < len(value) <= PREVIEW_ID_MAX_LENGTH and all(c.isalnum() or c in "-_" for c in value)


@dataclasses.dataclass(frozen=True)
class BulkConfirmation:
    """A preview that was already confirmed: by whom, when, and how many intents it changed."""

    action: str
    actor: str
    confirmed_at: dt.datetime
    acted: int

    def summary(self) -> str:
        verb = {"requeue": "requeued", "dead_letter": "dead-lettered"}[self.action]
        return (
            f"already confirmed by {self.actor} at {self.confirmed_at:%Y-%m-%d %H:%M:%S} UTC: "
            f"{verb} {plural(self.acted, 'intent')}"
        )


def confirmation_of(
    session: Session, preview_id: str, action: str, *, since: dt.datetime
) -> BulkConfirmation | None:
    """Return how preview `preview_id` was confirmed (audit entries after `since`), if it was."""
    found = session.execute(
        select(AuditEntry.actor, func.min(AuditEntry.created_at), func.count())
        .where(
            AuditEntry.action == action,
            AuditEntry.created_at >= since,
            AuditEntry.details["preview"].as_string() == preview_id,
        )
        .group_by(AuditEntry.actor)
        .order_by(func.min(AuditEntry.created_at))
    ).first()
    if found is None:
        return None
    actor, confirmed_at, acted = found
    return BulkConfirmation(action, actor, confirmed_at, acted)
