"""The send loop's prepared statements send the driver what ``Connection.execute`` sends.

``console.engine.sqlite_prepared`` runs the per-message mark and record on the DBAPI
cursor; these tests capture the SQL and parameters SQLAlchemy itself passes to the
driver for the same statement and values, on SQLite and PostgreSQL, and check that
errors, transactions and broken connections are handled as the engine handles them.
"""

from __future__ import annotations

import datetime as dt
import gc

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from console.engine import sqlite_prepared as sp
from console.store import statements as s

NOW = dt.datetime(2026, 11, 30, 12, 0, 5, 123456, tzinfo=dt.UTC)
VALUES = dict(
    b_id=41,
    b_token="lease-token",
    b_status="submitted",
    b_reason="accepted: 250 2.0.0 Ok",
    b_now=NOW,
    b_next_attempt_at=None,
    b_submitted_at=NOW,
    b_submitted_provider_id="4Qx1",
    b_attempt_id=7,
    b_stage="reply_read",
    b_outcome="accepted",
    b_reply_code=250,
    b_enhanced_status="2.0.0",
    b_reply_text="2.0.0 Ok: queued as 4Qx1",
    b_error=None,
    b_provider_message_id="4Qx1",
    b_duration_ms=3,
    b_address="ada@example.com",
    b_address_hash="ada@example.com",
)
STATEMENTS = {
    "mark": s.MARK_DATA_SENT_UNLESS_SUPPRESSED,
    "move": s.MOVE_LEASED_INTENT,
    "attempt": s.RECORD_ATTEMPT,
    "record if moved": s.RECORD_IF_MOVED,
}


def what_sqlalchemy_sends(connection, statement, values):
    sent = []

    def capture(conn, cursor, statement_text, parameters, context, executemany):
        sent.append((statement_text, parameters))

    event.listen(connection, "before_cursor_execute", capture)
    try:
        with connection.begin() as transaction:
            connection.execute(statement, values)
            transaction.rollback()
    finally:
        event.remove(connection, "before_cursor_execute", capture)
    [(statement_text, parameters)] = sent
    return statement_text, parameters


def test_the_sql_and_parameters_are_those_sqlalchemy_sends(engine):
    names = [n for n in STATEMENTS if engine.dialect.name == "postgresql" or n != "record if moved"]
    for name in names:
        statement = STATEMENTS[name]
        with engine.connect() as connection:
            expected_sql, expected = what_sqlalchemy_sends(connection, statement, VALUES)
        ready = sp.prepared(statement, engine.dialect)
        parameters = ready.parameters(VALUES)
        assert ready.sql == expected_sql, name
        assert type(parameters)(expected) == parameters, name
        if engine.dialect.name == "sqlite" and name != "mark":  # a time as the ORM stores it
            assert "2026-11-30 12:00:05.123456" in parameters, name


def test_a_prepared_statement_commits_its_own_work(engine):
    with engine.connect() as connection:
        connection.execute(text("CREATE TABLE scratch (n INTEGER)"))
        connection.commit()
        scratch = text("INSERT INTO scratch (n) VALUES (:n)")
        sp.prepared(scratch, engine.dialect).execute(connection, {"n": 1})
        sp.commit(connection)
        sp.prepared(scratch, engine.dialect).execute(connection, {"n": 2})
        sp.rollback(connection)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT n FROM scratch")).scalars().all() == [1]


def test_a_driver_error_is_raised_as_sqlalchemy_raises_it_without_the_values(engine):
    broken = text("UPDATE no_such_table SET n = :secret")
    with engine.connect() as connection:
        with pytest.raises(DBAPIError) as raised:
            sp.prepared(broken, engine.dialect).execute(connection, {"secret": "ada@x.com"})
        sp.rollback(connection)
    assert "no_such_table" in str(raised.value)
    assert "ada@x.com" not in str(raised.value)


def test_a_missing_value_is_refused_as_sqlalchemy_refuses_it(engine):
    values = {key: value for key, value in VALUES.items() if key != "b_token"}
    with engine.connect() as connection:
        with pytest.raises(SQLAlchemyError, match="b_token"):
            connection.execute(s.MOVE_LEASED_INTENT, values)
        connection.rollback()
        with pytest.raises(SQLAlchemyError, match="b_token"):
            sp.prepared(s.MOVE_LEASED_INTENT, engine.dialect).execute(connection, values)


def test_a_value_bound_twice_is_sent_twice(engine):
    with engine.connect() as connection:
        statement = sp.prepared(text("SELECT :n, :n + 1"), engine.dialect)
        assert tuple(statement.execute(connection, {"n": 4}).fetchone()) == (4, 5)
        sp.rollback(connection)


def test_a_statement_built_on_the_fly_never_gets_the_prepared_of_one_gone(engine):
    for _ in range(20):  # a freed statement's id is soon handed to the next one
        gone = text("SELECT :secret")
        sp.prepared(gone, engine.dialect)
        del gone
        gc.collect(0)  # the youngest generation: where the statement just freed is
        fresh = text("SELECT :n")
        assert sp.prepared(fresh, engine.dialect).parameters({"n": 1}) in ([1], {"n": 1})
