"""Search intents one keyset page at a time, each lookup served by an index.

Without text, the list is newest first. With text in the search box, the exact
lookups (recipient, Message-ID, provider id, #id) come first, newest first; then
the intents whose event or key starts with the text, in key order
(console.store.prefix_search), so a business event's own mail leads its longer
namesakes and a broad prefix costs no more than a narrow one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from sqlalchemy import ColumnElement, Row, false, func, not_, or_, select, text, tuple_
from sqlalchemy.orm import Session

from console.models import Intent, utcnow
from console.store.prefix_search import PrefixPosition, prefix_rows, sort_value
from console.store.search_filters import InvalidFilter, SearchFilters, exact_matches
from console.store.sql import PAGE_SIZE, dialect_of
from console.vocabulary import LANES


@dataclasses.dataclass(frozen=True)
class IntentRow:
    id: int
    event: str | None
    idempotency_key: str
    recipient: str
    template: str
    status: str
    lane: str
    attempt_count: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime
    status_reason: str | None


ROW_COLUMNS = [getattr(Intent, field.name) for field in dataclasses.fields(IntentRow)]


@dataclasses.dataclass(frozen=True)
class SearchPage:
    rows: list[IntentRow]
    next_after: str | None  # pass as `after` for the next page; None on the last page


@dataclasses.dataclass(frozen=True)
class NewestPosition:
    """The keyset position after a row in a newest-first list."""

    created_at: dt.datetime
    intent_id: int


Position = NewestPosition | PrefixPosition
Found = list[tuple[Row, Position]]  # rows with the position just after each
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NEWEST_CURSOR = re.compile(r"^(\d{1,20})-(\d{1,19})$")
_PREFIX_CURSOR = re.compile(r"^p(\d{1,19}):(.{1,320})$", re.DOTALL)


def encode_cursor(created_at: dt.datetime, intent_id: int) -> str:
    """Return the newest-first position just after this row: "<created_at in µs>-<id>"."""
    return f"{(created_at - _EPOCH) // dt.timedelta(microseconds=1)}-{intent_id}"


def _encode(position: Position) -> str:
    if isinstance(position, PrefixPosition):
        return f"p{position.intent_id}:{position.value}"
    return encode_cursor(position.created_at, position.intent_id)


def decode_cursor(cursor: str) -> Position:
    """Read a position made by this module; InvalidFilter for anything else."""
    try:
        if match := _NEWEST_CURSOR.match(cursor):
            created_at = _EPOCH + dt.timedelta(microseconds=int(match[1]))
            return NewestPosition(created_at, _row_id(match[2]))
        if match := _PREFIX_CURSOR.match(cursor):
            return PrefixPosition(match[2], _row_id(match[1]))
    except (OverflowError, ValueError):  # a time or an id beyond what any row holds
        pass
    raise InvalidFilter(f"the page position {cursor[:80]!r} is not one this console made")


def _row_id(digits: str) -> int:
    value = int(digits)
    if value > 2**63 - 1:
        raise ValueError("beyond BIGINT")
    return value


def search_intents(
    session: Session,
    filters: SearchFilters,
    *,
    after: str | None = None,
    limit: int = PAGE_SIZE,
    now: dt.datetime | None = None,
) -> SearchPage:
    """Return one page of matching intents after the keyset position `after`."""
    now = now or utcnow()
    dialect = dialect_of(session)
    if dialect == "postgresql":  # a generic plan cannot use an index for LIKE $1
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    conditions = filters.conditions(dialect, now, with_text=False)
    position = decode_cursor(after) if after else None
    if filters.q:
        found = _text_search(session, filters.q, conditions, position, limit + 1)
    else:
        if isinstance(position, PrefixPosition):
            raise InvalidFilter("that page position belongs to a search with text")
        found = _newest_first(session, _filter_branches(filters), conditions, position, limit + 1)
    next_after = _encode(found[limit - 1][1]) if len(found) > limit else None
    return SearchPage([IntentRow(*row) for row, _ in found[:limit]], next_after)


def _filter_branches(filters: SearchFilters) -> list[list[ColumnElement[bool]]]:
    """A status without a lane: one query per lane, each on the (status, lane, created_at) index."""
    if filters.status and not filters.lane:
        return [[Intent.lane == lane] for lane in LANES]
    return [[]]


def _text_search(
    session: Session,
    q: str,
    conditions: list[ColumnElement[bool]],
    position: Position | None,
    limit: int,
) -> Found:
    """The exact lookups newest first, then the prefix matches that are not exact ones."""
    exact = exact_matches(q)
    found: Found = []
    if not isinstance(position, PrefixPosition):
        branches = [[match] for match in exact]
        found = _newest_first(session, branches, conditions, position, limit)
        if len(found) >= limit:
            return found
        position = None
    not_exact = not_(func.coalesce(or_(*exact), false()))
    rows = prefix_rows(
        session, ROW_COLUMNS, q, [*conditions, not_exact], position, limit - len(found)
    )
    return found + [(row, PrefixPosition(sort_value(row, q), row.id)) for row in rows]


def _newest_first(
    session: Session,
    branches: list[list[ColumnElement[bool]]],
    conditions: list[ColumnElement[bool]],
    position: NewestPosition | None,
    limit: int,
) -> Found:
    """The newest `limit` rows of the branches' union, each read in (created_at, id) order."""
    older = []
    if position is not None:
        older.append(Intent.created_at <= position.created_at)
        older.append(
            tuple_(Intent.created_at, Intent.id) < tuple_(position.created_at, position.intent_id)
        )
    newest = (Intent.created_at.desc(), Intent.id.desc())
    found = {}
    for branch in branches:
        query = select(*ROW_COLUMNS).where(*conditions, *older, *branch)
        for row in session.execute(query.order_by(*newest).limit(limit)):
            found[row.id] = row
    rows = sorted(found.values(), key=lambda row: (row.created_at, row.id), reverse=True)
    return [(row, NewestPosition(row.created_at, row.id)) for row in rows[:limit]]
