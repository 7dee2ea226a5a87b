"""Small SQL helpers the console's queries share: the dialect, index-friendly prefixes, pages."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, func
from sqlalchemy.orm import Session

PAGE_SIZE = 50


def dialect_of(session: Session) -> str:
    """The name of the database dialect `session` talks to: "sqlite" or "postgresql"."""
    return session.get_bind().dialect.name


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
