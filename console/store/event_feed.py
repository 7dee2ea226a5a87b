"""The feed of provider events: every event newest first, filtered, one keyset page at a time.

Each filter is served by an index or by a scan that stops after a page: newest first is the
primary key; unmatched events come from the index on `matched_at`; a recipient's events are those
of the intents to that address (the recipient index, then the events' `intent_id` index) together
with the unmatched events naming it, so no filter reads the whole table.

And the page of one event: the event, its intent and the suppressions it caused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from console.models import Intent, ProviderEvent, Suppression
from console.store.sql_helpers import PAGE_SIZE

MATCHED = "matched"
UNMATCHED = "unmatched"
MATCH_STATES = (MATCHED, UNMATCHED)


@dataclasses.dataclass(frozen=True)
class FeedFilters:
    """Which events the feed lists: by type, source, recipient and match state (None: any)."""

    type: str | None = None
    source: str | None = None
    recipient: str | None = None
    match: str | None = None


@dataclasses.dataclass(frozen=True)
class FeedRow:
    id: int
    received_at: dt.datetime
    source: str
    event_type: str
    bounce_type: str | None
    recipient: str | None
    provider_message_id: str | None
    message_id: str | None
    intent_id: int | None
    matched_at: dt.datetime | None
    unmatched_reason: str | None
    intent_status: str | None


@dataclasses.dataclass(frozen=True)
class FeedPage:
    rows: list[FeedRow]
    next_before: int | None  # pass as `before` for the next (older) page; None on the last


_COLUMNS = [getattr(ProviderEvent, field.name) for field in dataclasses.fields(FeedRow)[:-1]] + [
    Intent.status
]


def events_page(
    session: Session,
    filters: FeedFilters,
    *,
    before: int | None = None,
    limit: int = PAGE_SIZE,
) -> FeedPage:
    """Return one page of events matching `filters`, newest first, older than id `before`."""
    conditions: list[ColumnElement[bool]] = []
    if filters.type:
        conditions.append(ProviderEvent.event_type == filters.type)
    if filters.source:
        conditions.append(ProviderEvent.source == filters.source)
    if filters.match == MATCHED:
        conditions.append(ProviderEvent.matched_at.is_not(None))
    elif filters.match == UNMATCHED:
        conditions.append(ProviderEvent.matched_at.is_(None))
    if before is not None:
        conditions.append(ProviderEvent.id < before)
    found: dict[int, FeedRow] = {}
    for branch, newest_first in _branches(filters):
        query = (
            select(*_COLUMNS)
            .outerjoin(Intent, Intent.id == ProviderEvent.intent_id)
            .where(*conditions, *branch)
            .order_by(newest_first.desc())
            .limit(limit + 1)
        )
        for row in session.execute(query):
            found[row.id] = FeedRow(*row)
    rows = sorted(found.values(), key=lambda row: row.id, reverse=True)
    next_before = rows[limit - 1].id if len(rows) > limit else None
    return FeedPage(rows[:limit], next_before)


Branch = tuple[list[ColumnElement[bool]], ColumnElement[int]]  # conditions, the id to sort on


def _branches(filters: FeedFilters) -> list[Branch]:
    """One query without a recipient; with one, its intents' events and its unmatched ones.

    The unmatched events naming the recipient are sorted on `id + 0`: the primary
    key cannot serve that order, so the planners read the few unmatched events from
    their index instead of walking the whole table newest first for a rare address.
    """
    if not filters.recipient:
        return [([], ProviderEvent.id)]
    address = filters.recipient
    local, _, domain = address.rpartition("@")
    spellings = {address, address.lower(), f"{local}@{domain.lower()}" if local else address}
    to_address = select(Intent.id).where(Intent.recipient.in_(spellings))
    branches: list[Branch] = []
    if filters.match != UNMATCHED:
        branches.append(([ProviderEvent.intent_id.in_(to_address)], ProviderEvent.id))
    if filters.match != MATCHED:
        naming = [
            ProviderEvent.matched_at.is_(None),
            func.lower(ProviderEvent.recipient) == address.lower(),
        ]
        branches.append((naming, ProviderEvent.id + 0))
    return branches


def count_unmatched(session: Session) -> int:
    """Return how many events still wait for their intent."""
    query = select(func.count()).where(ProviderEvent.matched_at.is_(None))
    return session.execute(query).scalar_one()


@dataclasses.dataclass(frozen=True)
class EventDetail:
    event: ProviderEvent
    intent: Intent | None
    suppressions: list[Suppression]  # the entries this event caused


def event_detail(session: Session, event_id: int) -> EventDetail | None:
    """Return one event with its intent and the suppressions it caused, or None."""
    event = session.get(ProviderEvent, event_id)
    if event is None:
        return None
    intent = session.get(Intent, event.intent_id) if event.intent_id is not None else None
    caused = select(Suppression).where(Suppression.source_event_id == event_id)
    return EventDetail(event, intent, list(session.scalars(caused)))
