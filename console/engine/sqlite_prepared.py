"""The send loop's per-message statements, compiled once and run on the driver's cursor.

The ``data_sent`` mark and the compare-and-set record run once a message each.
``Connection.execute`` spends longer looking the statement up in its compiled cache, building the
parameters and wrapping the result than SQLite's own work for these statements
(docs/benchmarks.md). A ``Prepared`` keeps SQLAlchemy's own compilation of the statement for the
connection's dialect (its SQL and its bind processors, so each value is converted exactly as
``Connection.execute`` converts it) and runs it on the DBAPI cursor of the SQLAlchemy connection.

It commits on the DBAPI connection too, so it is used only on a connection with no
transaction of SQLAlchemy's own begun (the SQLite engine's writer). A driver error is raised
as SQLAlchemy's ``DBAPIError`` without its parameters, as the engines raise it, and a broken
connection is invalidated so that the pool does not hand it out again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, InvalidRequestError
from sqlalchemy.sql import ClauseElement

_MISSING = object()


class Prepared:
    """A Core statement compiled once for a dialect, run on the DBAPI cursor."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self._dialect = dialect
        self.sql = compiled.string
        if any(bind.callable for bind in compiled.bind_names) or compiled.escaped_bind_names:
            raise ValueError(f"not a statement Prepared can run: {self.sql}")
        # each driver parameter: its name, where its value comes from, its processor
        # (what construct_params and the bind processors do, planned once); a
        # positional style lists a value bound twice twice
        steps = {
            name: (name, bind.key, bind.required, bind.value, _processor(bind, dialect))
            for bind, name in compiled.bind_names.items()
        }
        self._positions = compiled.positiontup  # None for a named paramstyle
        names = steps if self._positions is None else self._positions
        self._plan = [steps[name] for name in names]

    def parameters(self, values: dict[str, Any]) -> list[Any] | dict[str, Any]:
        """The driver's parameters for `values`, converted as SQLAlchemy converts them."""
        converted = []
        for _name, key, required, fixed, process in self._plan:
            value = values.get(key, _MISSING)
            if value is _MISSING:
                if required:
                    raise InvalidRequestError(f"A value is required for bind parameter {key!r}")
                value = fixed
            converted.append(value if process is None else process(value))
        if self._positions is None:
            return {step[0]: value for step, value in zip(self._plan, converted, strict=True)}
        return converted

    def execute(self, connection: Connection, values: dict[str, Any]) -> Any:
        """Run the statement with `values` on `connection`'s DBAPI cursor; the cursor."""
        dbapi_connection = connection.connection.dbapi_connection
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(self.sql, self.parameters(values))
        except self._dialect.loaded_dbapi.Error as error:
            raise self._wrapped(connection, error, dbapi_connection, cursor) from error
        return cursor

    def _wrapped(self, connection: Connection, error, dbapi_connection, cursor) -> DBAPIError:
        if self._dialect.is_disconnect(error, dbapi_connection, cursor):
            connection.invalidate(error)
        return DBAPIError.instance(
            self.sql,
            None,
            error,
            self._dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=self._dialect,
        )


def _processor(bind, dialect: Dialect):
    return bind.type.dialect_impl(dialect).bind_processor(dialect)


# Each entry holds its statement too: a statement that lived in the cache cannot be
# collected and its id handed to another one (a statement built on the fly).
_prepared: dict[tuple[int, str, str, str], tuple[ClauseElement, Prepared]] = {}


def prepared(statement: ClauseElement, dialect: Dialect) -> Prepared:
    """The `Prepared` of a module-level `statement` for dialects like `dialect`."""
    key = (id(statement), dialect.name, dialect.driver, dialect.paramstyle)
    found = _prepared.get(key)
    if found is None:
        found = _prepared[key] = (statement, Prepared(statement, dialect))
    return found[1]


def commit(connection: Connection) -> None:
    """Commit what `Prepared` statements did on `connection` (nothing in autocommit)."""
    connection.connection.dbapi_connection.commit()


def rollback(connection: Connection) -> None:
    """Roll back what `Prepared` statements did on `connection`."""
    connection.connection.dbapi_connection.rollback()
