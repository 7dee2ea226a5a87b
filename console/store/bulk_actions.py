"""Bulk actions over a filtered list: a preview of their effect, then the confirmed action.

The preview counts what the action would do, changing nothing; ``first_targets`` lists the first
intents it would act on, by name. ``apply_bulk`` makes the same choice as both: the search's
intents that existed at the preview, in a status the action allows, and (to requeue) neither
suppressed, emptied by retention nor past their application's expiry; in id order. Each change
is the compare-and-set and audit entry of ``console.store.actions``; none commits.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Intent, Suppression, utcnow
from console.store.actions import ActionRefused, apply_in_chunks, due_now_values, required_reason
from console.store.intent_search import SearchFilters
from console.vocabulary import DEAD, PENDING, REQUEUEABLE_STATUSES

BULK_LIMIT = 10_000
BULK_ACTIONS = {"requeue": REQUEUEABLE_STATUSES, "dead_letter": (PENDING,)}


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


_SCRUBBED = Intent.params_scrubbed_at.is_not(None)


def _past_expiry(at: dt.datetime) -> Any:
    """Intents whose application-set expiry has passed at `at`: requeue keeps it, so skips them."""
    return Intent.expires_at.is_not(None) & (Intent.expires_at <= at)


def _bulk_conditions(
    session: Session, filters: SearchFilters, action: str, at: dt.datetime
) -> tuple[list[Any], Any]:
    if action not in BULK_ACTIONS:
        raise ActionRefused("bulk_action_unknown", action=action)
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


LISTED = 20


@dataclasses.dataclass(frozen=True)
class BulkTarget:
    id: int
    event: str | None
    idempotency_key: str
    recipient: str
    status: str


def first_targets(
    session: Session,
    filters: SearchFilters,
    action: str,
    *,
    max_id: int,
    at: dt.datetime,
    limit: int = LISTED,
) -> list[BulkTarget]:
    """Return the first `limit` intents (by id) the bulk `action` previewed at `at` acts on."""
    conditions, suppressed = _bulk_conditions(session, filters, action, at)
    columns = [getattr(Intent, field.name) for field in dataclasses.fields(BulkTarget)]
    query = select(*columns).where(
        *conditions, Intent.id <= max_id, Intent.status.in_(BULK_ACTIONS[action])
    )
    if action == "requeue":
        query = query.where(~suppressed, ~_SCRUBBED, ~_past_expiry(at))
    return [BulkTarget(*row) for row in session.execute(query.order_by(Intent.id).limit(limit))]
