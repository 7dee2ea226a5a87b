"""Values between the store's Python types and psycopg on PostgreSQL's send path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any


def aware(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each naive timestamp taken as UTC (as the store's columns take it)."""
    return {
        name: value.replace(tzinfo=dt.UTC)
        if isinstance(value, dt.datetime) and value.tzinfo is None
        else value
        for name, value in values.items()
    }


def utc_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """`rows` with each timestamp in UTC, as the store's columns read it."""
    return [
        [value.astimezone(dt.UTC) if isinstance(value, dt.datetime) else value for value in row]
        for row in rows
    ]
