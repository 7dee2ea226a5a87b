"""A search's every result, for export: walked page by page, each page its own short read.

The pages are the search's own keyset pages (console.store.intent_search), so an export lists
exactly what the search lists, in the same order, and reads one bounded page at a time whatever
the size of the result; no transaction stays open between pages.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from console.models import Intent, utcnow
from console.store import delivery_facts
from console.store.intent_search import SearchFilters, search_intents
from console.store.json_values import UnreadableJSON

BATCH_SIZE = 500  # intents read per page
# the intent's own columns every export carries, in this order
STORED_COLUMNS = (
    "id",
    "idempotency_key",
    "event",
    "recipient",
    "recipient_account",
    "template",
    "template_version",
    "status",
    "lane",
    "attempt_count",
    "created_at",
    "next_attempt_at",
    "message_id",
    "provider_message_id",
    "purpose",
    "status_reason",
    "expires_at",
    "submitted_at",
    "delivered_at",
    "bounced_at",
    "bounce_type",
    "complained_at",
    "delayed_at",
    "rejected_at",
)
# the provider's latest report (console.store.delivery_facts), after the stored columns
FACT_COLUMNS = ("latest_fact", "latest_fact_at")
EXPORT_COLUMNS = STORED_COLUMNS + FACT_COLUMNS
CONTENT_COLUMNS = ("params",)  # message content: operators only


def export_columns(*, with_content: bool) -> tuple[str, ...]:
    """The columns of an export, with the message content or without."""
    return EXPORT_COLUMNS + CONTENT_COLUMNS if with_content else EXPORT_COLUMNS


def export_rows(
    session_factory: sessionmaker[Session],
    filters: SearchFilters,
    *,
    with_content: bool,
    now: dt.datetime | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield every intent the search `filters` finds, as {column: value}, in search order."""
    now = now or utcnow()  # one clock for every page, so an age filter does not drift
    names = STORED_COLUMNS + CONTENT_COLUMNS if with_content else STORED_COLUMNS
    columns = [getattr(Intent, name) for name in names]
    after = None
    while True:
        with session_factory() as session:
            page = search_intents(session, filters, after=after, limit=BATCH_SIZE, now=now)
            facts = {row.id: row.fact for row in page.rows}
            ids = list(facts)
            found = {}
            if ids:
                query = select(*columns).where(Intent.id.in_(ids))
                found = {
                    row.id: _exported(row._asdict(), facts[row.id])
                    for row in session.execute(query)
                }
        yield from (found[intent_id] for intent_id in ids if intent_id in found)
        if page.next_after is None:
            return
        after = page.next_after


def _exported(row: dict[str, Any], fact: delivery_facts.DeliveryFact | None) -> dict[str, Any]:
    """`row` with its latest fact, and stored params that could not be read shown as why."""
    row["latest_fact"] = fact.kind if fact else None
    row["latest_fact_at"] = fact.at if fact else None
    params = row.get("params")
    if isinstance(params, UnreadableJSON):
        row["params"] = {"unreadable": params.problem}
    return row
