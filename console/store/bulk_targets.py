"""The first intents a bulk action would act on, for its preview to list by name.

The same choice `bulk.apply_bulk` makes: the search's intents that existed at the
preview, in a status the action allows, and (to requeue) neither suppressed,
emptied by retention nor past their application's expiry; in id order.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.models import Intent
from console.store.bulk import _SCRUBBED, BULK_ACTIONS, _bulk_conditions, _past_expiry
from console.store.search_filters import SearchFilters

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
