"""The feed of provider events: every event newest first, filtered, one keyset page at a time.

Each filter is served by an index or by a scan that stops after a page:
newest first is the primary key; unmatched events come from the index on
`matched_at`; a recipient's events are those of the intents to that address
(the recipient index, then the events' `intent_id` index) together with the
unmatched events naming it, so no filter reads the whole table.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from console.events import (
    ACCEPTED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    MAX_EVENT_TYPE_LENGTH,
    NOT_SPAM,
    REJECTED,
    SET_UP_EVENTS,
)
from console.models import Intent, ProviderEvent
from console.store.sql import PAGE_SIZE

EVENT_TYPES = (
    DELIVERED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    ACCEPTED,
    REJECTED,
    NOT_SPAM,
    *SET_UP_EVENTS,
)
EVENT_SOURCES = ("ses", "webhook", "resend", "postmark", "mailgun", "sendgrid")
MATCHED = "matched"
UNMATCHED = "unmatched"
MATCH_STATES = (MATCHED, UNMATCHED)
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


class InvalidEventFilter(ValueError):
    """An event filter has a value the console does not accept; the message names it."""


@dataclasses.dataclass(frozen=True)
class EventFilters:
    """What the feed's filter form asks for."""

    type: str | None = None
    source: str | None = None
    recipient: str | None = None
    match: str | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> EventFilters:
        """Read filters from query arguments; InvalidEventFilter on a value that cannot be."""
        values = {name: (args.get(name) or "").strip() or None for name in ("type", "source")}
        for name, longest in (("type", MAX_EVENT_TYPE_LENGTH), ("source", 50)):
            value = values[name]
            if value and (len(value) > longest or not _NAME.match(value)):
                raise InvalidEventFilter(f"unknown event {name} {value[:40]!r}")
        match = (args.get("match") or "").strip() or None
        if match and match not in MATCH_STATES:
            raise InvalidEventFilter(f"unknown match state {match[:40]!r}")
        recipient = (args.get("recipient") or "").strip()[:320] or None
        return cls(recipient=recipient, match=match, **values)

    def as_args(self) -> dict[str, str]:
        """Return the non-empty filters as query arguments (for links)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value}


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
    filters: EventFilters,
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


def _branches(filters: EventFilters) -> list[Branch]:
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
