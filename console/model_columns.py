"""The column types, constraint helpers and declarative base every table shares."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, DateTime, Index, Integer, MetaData, TypeDecorator
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import DeclarativeBase

ID = BigInteger().with_variant(Integer, "sqlite")
_SQLITE_TEXT = sqlite.DATETIME._storage_format  # of the UTC time: YYYY-MM-DD HH:MM:SS.ffffff


class UTCDateTime(TypeDecorator):
    """A timestamp stored in UTC and always read back timezone-aware.

    A naive value is taken to be UTC already. SQLite stores the naive UTC text.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: Any):
        """On SQLite, a plain datetime goes straight to the text SQLAlchemy would store
        (``YYYY-MM-DD HH:MM:SS.ffffff`` of the UTC time) in one step instead of two: the
        send loop binds several timestamps a message."""
        processor = super().bind_processor(dialect)
        if (
            processor is None
            or getattr(self.impl_instance, "_storage_format", None) != _SQLITE_TEXT
        ):
            return processor  # not SQLite's own DATETIME with its default format

        def utc_text(value: Any) -> Any:
            if value.__class__ is not dt.datetime:
                return processor(value)
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value.isoformat(" ", "microseconds")

        return utc_text

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def check_in(column: str, values: tuple[str, ...]) -> str:
    """A CHECK constraint's text: `column` holds one of `values`."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


def partial_index(name: str, *columns: Any, where: Any) -> Index:
    """An index of the rows matching `where` only, on PostgreSQL and SQLite alike."""
    return Index(name, *columns, postgresql_where=where, sqlite_where=where)
