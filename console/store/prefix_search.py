"""Event and key prefixes in key order, for the search box: a keyset walk of the two prefix
indexes. Reads only.

A prefix may match a handful of intents or a tenth of the table, recent or weeks old. Each
column's index is walked from the page position and the walk stops after one page, so a page
costs the same whichever: no match is ever sorted.

Rows come in the order of their *sort value* — the smaller of the event and the idempotency key
among those that start with the prefix — then of their id. The walk of one column yields, in that
column's order, the rows whose sort value is past the position; a row both walks find is placed
by its smaller value. The first rows of the two walks, merged, are therefore the page.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import ColumnElement, and_, literal_column, not_, select
from sqlalchemy.orm import Session

from console.models import Intent
from console.store.sql_helpers import prefix_match

PREFIX_COLUMNS = (Intent.event, Intent.idempotency_key)


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
