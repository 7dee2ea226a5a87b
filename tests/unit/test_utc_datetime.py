"""The timestamp column type: what it hands SQLite is exactly SQLAlchemy's own text for the
UTC time (its quicker path for a plain datetime must not change a stored character)."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest
from sqlalchemy import TypeDecorator
from sqlalchemy.dialects import postgresql, sqlite

from console.model_columns import UTCDateTime

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
VALUES = [
    dt.datetime(2026, 11, 30, 12, 0, 5, 123456, tzinfo=dt.UTC),
    dt.datetime(2026, 11, 30, 12, 0, 5, tzinfo=dt.UTC),  # no microseconds
    dt.datetime(2026, 11, 30, 12, 0, 5, 7),  # naive: taken as UTC
    dt.datetime(2026, 3, 29, 1, 30, tzinfo=PLUS_TWO),  # another zone, the day before in UTC
    dt.datetime(1, 1, 1, 2, 0, tzinfo=PLUS_TWO).replace(year=1, day=1, hour=3),
    dt.datetime(999, 12, 31, 23, 59, 59, 999999),
    None,
]


def sqlalchemy_text(value, dialect):
    """What TypeDecorator's own processing (process_bind_param, then the dialect's) gives."""
    return TypeDecorator.bind_processor(UTCDateTime().dialect_impl(dialect), dialect)(value)


@pytest.mark.parametrize("value", VALUES, ids=str)
def test_sqlite_gets_sqlalchemys_own_text_of_the_utc_time(value):
    dialect = sqlite.dialect()
    assert UTCDateTime().dialect_impl(dialect).bind_processor(dialect)(value) == sqlalchemy_text(
        value, dialect
    )


def test_a_value_that_is_not_a_plain_datetime_takes_sqlalchemys_path():
    class Moment(dt.datetime):
        pass

    moment = Moment(2026, 11, 30, 12, 0, 5, tzinfo=dt.UTC)
    dialect = sqlite.dialect()
    processor = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert processor(moment) == sqlalchemy_text(moment, dialect)
    with pytest.raises(AttributeError):
        sqlalchemy_text("2026-11-30", dialect)
    with pytest.raises(AttributeError):
        processor("2026-11-30")


def test_postgresql_keeps_the_aware_value():
    value = dt.datetime(2026, 3, 29, 1, 30, tzinfo=PLUS_TWO)
    dialect = postgresql.psycopg.dialect()
    processor = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    processed = processor(value) if processor else value
    assert processed == value and processed.tzinfo is not None


def test_a_stored_time_reads_back_as_written(tmp_path):
    from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select

    table = Table(
        "t", MetaData(), Column("id", Integer, primary_key=True), Column("at", UTCDateTime)
    )
    engine = create_engine(f"sqlite:///{tmp_path / 't.db'}")
    table.metadata.create_all(engine)
    written = [v for v in VALUES if v is not None and v.year > 1000]
    with engine.begin() as connection:
        connection.execute(insert(table), [{"at": v} for v in written])
        read = connection.execute(select(table.c.at).order_by(table.c.id)).scalars().all()
    expected = [v.replace(tzinfo=dt.UTC) if v.tzinfo is None else v for v in written]
    assert read == expected and all(r.tzinfo is dt.UTC for r in read)
    assert sqlite3  # the driver the texts are for
