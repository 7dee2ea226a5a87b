"""Finding intents: the console's search (its filters and the keyset walk of the prefix
indexes) and the export that walks the same pages. Reads only.

A search asks for text in the search box and the status, lane, template and age filters. It
walks one keyset page at a time, each lookup served by an index. Without text, the list is
newest first. With text in the search box, the exact lookups (recipient, Message-ID, provider
id, #id) come first, newest first; then the intents whose event or key starts with the text, in
key order (``console.store.prefix_search``), so a business event's own mail leads its longer
namesakes and a broad prefix costs no more than a narrow one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    false,
    func,
    not_,
    or_,
    select,
    text,
    tuple_,
)
from sqlalchemy.orm import Session

from console.core.whole_numbers import whole_number
from console.models import Intent, utcnow
from console.store import delivery_facts
from console.store.prefix_search import PREFIX_COLUMNS, PrefixPosition, prefix_rows, sort_value
from console.store.sql_helpers import PAGE_SIZE, dialect_of, prefix_match
from console.vocabulary import LANES, STATUSES
from console.words.refusals import Refusal

# name -> (youngest age in seconds, oldest age in seconds or None); the pages name them
# (console/web/display.py, AGE_WORDS)
AGE_BUCKETS: dict[str, tuple[int, int | None]] = {
    "lt1m": (0, 60),
    "1to5m": (60, 300),
    "5to60m": (300, 3600),
    "gt1h": (3600, None),
}
# the search filter offers the dashboard's buckets and two wider ones
SEARCH_AGES: dict[str, tuple[int, int | None]] = {
    **AGE_BUCKETS,
    "lt1d": (0, 86400),
    "gt1d": (86400, None),
}


class _AnyValue:
    def __contains__(self, value: object) -> bool:
        return True


class InvalidFilter(Refusal, ValueError):
    """A search filter or page position the console does not know: `reason` and its facts."""


@dataclasses.dataclass(frozen=True)
class SearchFilters:
    """What the search box and the filter menus ask for."""

    q: str = ""
    status: str | None = None
    lane: str | None = None
    template: str | None = None
    age: str | None = None
    fact: str | None = None  # one of delivery_facts.FACT_FILTERS
    within: str | None = None  # the fact's window, a key of RATE_WINDOWS

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> SearchFilters:
        """Read filters from query arguments; InvalidFilter on an unknown value."""
        values = {name: (args.get(name) or "").strip() or None for name in _KNOWN}
        for name, known in _KNOWN.items():
            if values[name] and values[name] not in known:
                raise InvalidFilter("filter_unknown", name=name, value=values[name])
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
        if self.fact:
            conditions.extend(delivery_facts.fact_conditions(self.fact, self.within, now))
        return conditions


# each filter's name -> the values it takes; any template may be asked
_KNOWN: dict[str, Any] = {
    "status": STATUSES,
    "lane": LANES,
    "template": _AnyValue(),
    "age": SEARCH_AGES,
    "fact": delivery_facts.FACT_FILTERS,
    "within": delivery_facts.WITHIN,
}


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
    youngest_seconds, oldest_seconds = SEARCH_AGES[age]
    conditions = [Intent.created_at <= now - dt.timedelta(seconds=youngest_seconds)]
    if oldest_seconds is not None:
        conditions.append(Intent.created_at > now - dt.timedelta(seconds=oldest_seconds))
    return conditions


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
    delivered_at: dt.datetime | None
    delayed_at: dt.datetime | None
    bounced_at: dt.datetime | None
    complained_at: dt.datetime | None
    rejected_at: dt.datetime | None
    bounce_type: str | None

    @property
    def fact(self) -> delivery_facts.DeliveryFact | None:
        """The provider's latest report on this intent."""
        return delivery_facts.latest_fact(self)


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
    raise InvalidFilter("position_unknown", position=cursor)


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
            raise InvalidFilter("position_needs_text")
        found = _newest_first(session, _filter_branches(filters), conditions, position, limit + 1)
    next_after = _encode(found[limit - 1][1]) if len(found) > limit else None
    return SearchPage([IntentRow(*row) for row, _ in found[:limit]], next_after)


def stored_events(
    session: Session, candidates: set[str], filters: SearchFilters, now: dt.datetime | None = None
) -> list[str]:
    """The candidates stored as an intent's event or key that `filters` would list."""
    conditions = filters.conditions(dialect_of(session), now or utcnow(), with_text=False)
    found: set[str] = set()
    for column in PREFIX_COLUMNS:
        query = select(column).where(column.in_(candidates), *conditions).distinct()
        found.update(session.scalars(query))
    return sorted(found & candidates)


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
