"""Small SQL helpers the console's queries share: the dialect, an INSERT with ON CONFLICT both
databases read alike, index-friendly prefixes, the page size."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, func, text
from sqlalchemy.orm import Session
from sqlalchemy.sql import TextClause

PAGE_SIZE = 50


def dialect_of(session: Session) -> str:
    """The name of the database dialect `session` talks to: "sqlite" or "postgresql"."""
    return session.get_bind().dialect.name


def insert_on_conflict(
    table: Any, columns: Sequence[str], conflict: str, then: str = "NOTHING", returning: str = ""
) -> TextClause:
    """``INSERT INTO table (columns) VALUES (:columns) ON CONFLICT (conflict) DO then``:
    SQLite and PostgreSQL spell it alike, so one statement serves both. Each value is bound
    with its column's type; `returning`, when given, names what the row gives back."""
    names = ", ".join(columns)
    values = ", ".join(f":{column}" for column in columns)
    sql = (
        f"INSERT INTO {table.name} ({names}) VALUES ({values}) "
        f"ON CONFLICT ({conflict}) DO {then}" + (f" RETURNING {returning}" if returning else "")
    )
    return text(sql).bindparams(*(bindparam(c, type_=table.c[c].type) for c in columns))


def insert_for(dialect: str) -> Any:
    """The INSERT construct of `dialect` (postgresql or sqlite): both have ON CONFLICT."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def prefix_match(column: Any, prefix: str, dialect: str) -> ColumnElement[bool]:
    """Match values starting with `prefix` in a way that uses the column's index.

    PostgreSQL's indexes use varchar_pattern_ops, which serve LIKE 'x%'; SQLite's
    LIKE ignores case and skips the index, so there it is a range on the BINARY index.
    """
    if dialect == "postgresql":
        return column.startswith(prefix, autoescape=True)
    if ord(prefix[-1]) >= 0x10FFFF:
        return and_(column >= prefix, func.substr(column, 1, len(prefix)) == prefix)
    following = ord(prefix[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates cannot be stored: the next character is U+E000
        following = 0xE000
    upper = prefix[:-1] + chr(following)
    return and_(column >= prefix, column < upper)
