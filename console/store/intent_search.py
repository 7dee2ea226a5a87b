"""Finding intents: the console's search (its filters and the keyset walk of the prefix
indexes) and the export that walks the same pages. Reads only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    and_,
    false,
    func,
    literal_column,
    not_,
    or_,
    select,
    text,
    tuple_,
)
from sqlalchemy.orm import Session, sessionmaker

from console.core.whole_numbers import whole_number
from console.models import Intent, utcnow
from console.store.database import UnreadableJSON
from console.store.statements import PAGE_SIZE, dialect_of, prefix_match
from console.vocabulary import LANES, STATUSES

# Search filters ----------------------------------------------------------------------------------
#
# What a search asks for: the search box, the status, lane, template and age filters.

# name -> (label, youngest age in seconds, oldest age in seconds or None)
AGE_BUCKETS: dict[str, tuple[str, int, int | None]] = {
    "lt1m": ("under 1 min", 0, 60),
    "1to5m": ("1–5 min", 60, 300),
    "5to60m": ("5–60 min", 300, 3600),
    "gt1h": ("over 1 h", 3600, None),
}
# the search filter offers the dashboard's buckets and two wider ones
SEARCH_AGES: dict[str, tuple[str, int, int | None]] = {
    **AGE_BUCKETS,
    "lt1d": ("under 1 day", 0, 86400),
    "gt1d": ("over 1 day", 86400, None),
}


class InvalidFilter(ValueError):
    """A search filter has a value the console does not know; the message names it."""


@dataclasses.dataclass(frozen=True)
class SearchFilters:
    """What the search box and the filter menus ask for."""

    q: str = ""
    status: str | None = None
    lane: str | None = None
    template: str | None = None
    age: str | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> SearchFilters:
        """Read filters from query arguments; InvalidFilter on an unknown value."""
        values = {name: (args.get(name) or "").strip() or None for name in ("status", "lane")}
        values["template"] = (args.get("template") or "").strip() or None
        values["age"] = (args.get("age") or "").strip() or None
        if values["status"] and values["status"] not in STATUSES:
            raise InvalidFilter(f"unknown status {values['status']!r}")
        if values["lane"] and values["lane"] not in LANES:
            raise InvalidFilter(f"unknown lane {values['lane']!r}")
        if values["age"] and values["age"] not in SEARCH_AGES:
            raise InvalidFilter(f"unknown age {values['age']!r}")
        return cls(q=(args.get("q") or "").strip()[:320], **values)

    def as_args(self) -> dict[str, str]:
        """Return the non-empty filters as query arguments (for links)."""
        fields = dataclasses.asdict(self)
        return {name: value for name, value in fields.items() if value}

    def conditions(
        self, dialect: str, now: dt.datetime, *, with_text: bool = True
    ) -> list[ColumnElement[bool]]:
        """Return the WHERE conditions on email_intent these filters mean."""
        conditions: list[ColumnElement[bool]] = []
        if self.q and with_text:
            conditions.append(or_(*_text_matches(self.q, dialect)))
        if self.status:
            conditions.append(Intent.status == self.status)
        if self.lane:
            conditions.append(Intent.lane == self.lane)
        if self.template:
            conditions.append(Intent.template == self.template)
        if self.age:
            conditions.extend(age_conditions(self.age, now))
        return conditions


PREFIX_COLUMNS = (Intent.event, Intent.idempotency_key)


def _text_matches(q: str, dialect: str) -> list[ColumnElement[bool]]:
    """The one search box: event or key prefix, recipient, Message-ID, provider id, #id."""
    prefixes = [prefix_match(column, q, dialect) for column in PREFIX_COLUMNS]
    return prefixes + exact_matches(q)


def exact_matches(q: str) -> list[ColumnElement[bool]]:
    """The lookups of the search box that must match whole: recipient, Message-ID, ids."""
    matches = [Intent.provider_message_id == q]
    if "@" in q:
        local, _, domain = q.rpartition("@")
        bare = q.strip("<>")
        matches.append(Intent.recipient.in_({q, q.lower(), f"{local}@{domain.lower()}"}))
        matches.append(Intent.message_id.in_({q, f"<{bare}>"}))
    intent_id = whole_number(q.removeprefix("#"))
    if intent_id is not None:
        matches.append(Intent.id == intent_id)
    return matches


def age_conditions(age: str, now: dt.datetime) -> list[ColumnElement[bool]]:
    """Conditions on created_at for an age bucket of SEARCH_AGES."""
    _, youngest_seconds, oldest_seconds = SEARCH_AGES[age]
    conditions = [Intent.created_at <= now - dt.timedelta(seconds=youngest_seconds)]
    if oldest_seconds is not None:
        conditions.append(Intent.created_at > now - dt.timedelta(seconds=oldest_seconds))
    return conditions


# Prefix search -----------------------------------------------------------------------------------
#
# Event and key prefixes in key order: a keyset walk of the two prefix indexes.
#
# A prefix may match a handful of intents or a tenth of the table, recent or weeks old. Each
# column's index is walked from the page position and the walk stops after one page, so a page
# costs the same whichever: no match is ever sorted.
#
# Rows come in the order of their *sort value* — the smaller of the event and the idempotency key
# among those that start with the prefix — then of their id. The walk of one column yields, in that
# column's order, the rows whose sort value is past the position; a row both walks find is placed
# by its smaller value. The first rows of the two walks, merged, are therefore the page.


@dataclasses.dataclass(frozen=True)
class PrefixPosition:
    """The keyset position after a row: its sort value and id."""

    value: str
    intent_id: int


def sort_value(row: Any, prefix: str) -> str:
    """The smaller of the row's event and key among those starting with `prefix`."""
    values = (getattr(row, column.key) for column in PREFIX_COLUMNS)
    return min(value for value in values if value is not None and value.startswith(prefix))


def prefix_rows(
    session: Session,
    columns: list[Any],
    prefix: str,
    conditions: list[ColumnElement[bool]],
    after: PrefixPosition | None,
    limit: int,
) -> list[Any]:
    """The first `limit` rows (of `columns`) matching `prefix` and `conditions` past `after`."""
    dialect = session.get_bind().dialect.name
    found = {}
    for column in PREFIX_COLUMNS:
        for row in _walk(session, columns, column, prefix, conditions, after, limit, dialect):
            found[row.id] = row
    ordered = sorted(found.values(), key=lambda row: (sort_value(row, prefix), row.id))
    return ordered[:limit]


def _walk(
    session: Session,
    columns: list[Any],
    column: Any,
    prefix: str,
    conditions: list[ColumnElement[bool]],
    after: PrefixPosition | None,
    limit: int,
    dialect: str,
) -> list[Any]:
    """The first `limit` rows in (column, id) order whose sort value is past `after`.

    Past the position means: the rest of the position's value (same value, higher
    id), then the values after it; and no other column placed the row at or
    before the position already.
    """
    matching = [prefix_match(column, prefix, dialect), *conditions]
    matching += [_not_placed_by(other, prefix, after, dialect) for other in _others(column, after)]
    rows: list[Any] = []
    if after is not None:
        same_value = select(*columns).where(
            *matching, column == after.value, Intent.id > after.intent_id
        )
        rows += session.execute(same_value.order_by(Intent.id).limit(limit)).all()
    if len(rows) < limit:
        later = [_bytewise(column, ">", after.value, dialect)] if after is not None else []
        query = select(*columns).where(*matching, *later)
        query = query.order_by(_in_key_order(column, dialect), Intent.id)
        rows += session.execute(query.limit(limit - len(rows))).all()
    return rows


def _others(column: Any, after: PrefixPosition | None) -> list[Any]:
    return [] if after is None else [other for other in PREFIX_COLUMNS if other is not column]


def _not_placed_by(
    other: Any, prefix: str, after: PrefixPosition | None, dialect: str
) -> ColumnElement[bool]:
    """True unless `other` matches the prefix with a (value, id) at or before `after`.

    A NULL `other` (an intent without an event) matches nothing: true, never NULL.
    """
    at_or_before = _bytewise(other, "<", after.value, dialect) | and_(
        other == after.value, Intent.id <= after.intent_id
    )
    return not_(and_(other.is_not(None), prefix_match(other, prefix, dialect), at_or_before))


def _bytewise(column: Any, operator: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Compare as the prefix indexes order: byte by byte (PostgreSQL's pattern operators)."""
    if dialect == "postgresql":
        return column.op(f"~{operator}~", is_comparison=True)(value)
    return column > value if operator == ">" else column < value


def _in_key_order(column: Any, dialect: str) -> Any:
    """ORDER BY the column in its index's order (varchar_pattern_ops on PostgreSQL)."""
    if dialect == "postgresql":
        return literal_column(f"{column.table.name}.{column.key} USING ~<~")
    return column


# Search ------------------------------------------------------------------------------------------
#
# Search intents one keyset page at a time, each lookup served by an index.
#
# Without text, the list is newest first. With text in the search box, the exact lookups
# (recipient, Message-ID, provider id, #id) come first, newest first; then the intents whose event
# or key starts with the text, in key order (the prefix search above), so a business event's own
# mail leads its longer namesakes and a broad prefix costs no more than a narrow one.


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


# Export ------------------------------------------------------------------------------------------
#
# A search's every result, for export: walked page by page, each page its own short read.
#
# The pages are the search's own keyset pages (the search above), so an export lists exactly what
# the search lists, in the same order, and reads one bounded page at a time whatever the size of
# the result; no transaction stays open between pages.

BATCH_SIZE = 500  # intents read per page
# what every export carries, in this order
EXPORT_COLUMNS = (
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
)
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
    columns = [getattr(Intent, name) for name in export_columns(with_content=with_content)]
    after = None
    while True:
        with session_factory() as session:
            page = search_intents(session, filters, after=after, limit=BATCH_SIZE, now=now)
            ids = [row.id for row in page.rows]
            found = {}
            if ids:
                query = select(*columns).where(Intent.id.in_(ids))
                found = {row.id: _exported(row._asdict()) for row in session.execute(query)}
        yield from (found[intent_id] for intent_id in ids if intent_id in found)
        if page.next_after is None:
            return
        after = page.next_after


def _exported(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with stored params that could not be read shown as why, not as their text."""
    params = row.get("params")
    if isinstance(params, UnreadableJSON):
        row["params"] = {"unreadable": params.problem}
    return row
