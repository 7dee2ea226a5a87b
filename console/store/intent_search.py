"""Search intents newest first, one keyset page at a time, each lookup served by an index."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Any

from sqlalchemy import func, select, text, tuple_
from sqlalchemy.orm import Session
from sqlalchemy.sql.util import ClauseAdapter

from console.models import Intent, utcnow
from console.store.search_filters import Branch, InvalidFilter, SearchFilters
from console.store.sql import PAGE_SIZE, dialect_of

RECENT_WINDOW = 5_000  # a broad prefix search first looks among this many newest intents


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


@dataclasses.dataclass(frozen=True)
class SearchPage:
    rows: list[IntentRow]
    next_after: str | None  # pass as `after` for the next page; None on the last page


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_CURSOR = re.compile(r"^(\d{1,20})-(\d{1,19})$")


def encode_cursor(created_at: dt.datetime, intent_id: int) -> str:
    """Return the keyset position just after this row: "<created_at in µs>-<id>"."""
    return f"{(created_at - _EPOCH) // dt.timedelta(microseconds=1)}-{intent_id}"


def decode_cursor(cursor: str) -> tuple[dt.datetime, int]:
    match = _CURSOR.match(cursor)
    if match is None:
        raise InvalidFilter(f"the page position {cursor!r} is not one this console made")
    created_at = _EPOCH + dt.timedelta(microseconds=int(match[1]))
    return created_at, int(match[2])


def search_intents(
    session: Session,
    filters: SearchFilters,
    *,
    after: str | None = None,
    limit: int = PAGE_SIZE,
    now: dt.datetime | None = None,
) -> SearchPage:
    """Return one page of matching intents, newest first, after the keyset position `after`.

    Rows are ordered by (created_at, id). Each branch of the search (see
    SearchFilters.branches) fetches one page in that order from its own index;
    the page is the newest rows of their union.
    """
    now = now or utcnow()
    dialect = dialect_of(session)
    if dialect == "postgresql":  # a generic plan cannot use an index for LIKE $1
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
    conditions = filters.conditions(dialect, now, with_text=False)
    position = []
    if after:
        after_created_at, after_id = decode_cursor(after)
        position.append(Intent.created_at <= after_created_at)
        position.append(tuple_(Intent.created_at, Intent.id) < tuple_(after_created_at, after_id))
    found: dict[int, IntentRow] = {}
    for branch in filters.branches(dialect):
        rows = _branch_rows(session, conditions, position, branch, limit + 1)
        found.update((row.id, row) for row in rows)
    rows = sorted(found.values(), key=lambda row: (row.created_at, row.id), reverse=True)
    last = rows[limit - 1] if len(rows) > limit else None
    next_after = encode_cursor(last.created_at, last.id) if last else None
    return SearchPage(rows=rows[:limit], next_after=next_after)


def _branch_rows(
    session: Session, conditions: list, position: list, branch: Branch, limit: int
) -> list[IntentRow]:
    """The newest `limit` rows of one branch.

    A prefix may match most rows or a few: first look for a page among the
    RECENT_WINDOW newest intents (walking the created_at index); failing that,
    read every match through the prefixes' indexes and sort them (ordering by
    an unindexed created_at keeps the planner from walking created_at through
    matches clustered far in the past).
    """
    columns = [getattr(Intent, field.name) for field in dataclasses.fields(IntentRow)]
    newest = (Intent.created_at.desc(), Intent.id.desc())
    if branch.may_be_broad:
        # the row columns include every column the filters and the prefixes test
        recent = select(*columns).where(*position).order_by(*newest).limit(RECENT_WINDOW)
        window = recent.subquery()
        query = (
            select(window)
            .where(*_adapt(window, [*conditions, *branch.conditions]))
            .order_by(window.c.created_at.desc(), window.c.id.desc())
            .limit(limit)
        )
        rows = [IntentRow(*row) for row in session.execute(query)]
        if len(rows) == limit:
            return rows
        newest = (_without_index(Intent.created_at).desc(), Intent.id.desc())
    query = select(*columns).where(*conditions, *position, *branch.conditions)
    return [IntentRow(*row) for row in session.execute(query.order_by(*newest).limit(limit))]


def _without_index(expression: Any) -> Any:
    """The same value, out of reach of any index (coalesce(x, x) is x)."""
    return func.coalesce(expression, expression)


def _adapt(subquery: Any, conditions: list) -> list:
    """Rewrite conditions on email_intent to refer to the same columns of `subquery`."""
    adapter = ClauseAdapter(subquery)
    return [adapter.traverse(condition) for condition in conditions]
