"""PostgreSQL next door: statements run on a connection's socket while the event loop goes on.

One prepared statement sent with libpq's asynchronous calls, and the two writes of the send
loop that use it: the ``data_sent`` mark and the records of several attempts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import errors as psycopg_errors
from psycopg import pq
from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

from console.store import statements as s
from console.store.records import COLUMNS, RECORD_BATCH_IF_MOVED

# Statements on the socket ------------------------------------------------------------------------
#
# PostgreSQL next door: one prepared statement run on a connection's socket while the event loop
# goes on (the ``data_sent`` mark and the grouped records below).
#
# A statement run by the driver stops the event loop until PostgreSQL answers, and next door that
# wait outweighs the statement's own work. Here it is sent with libpq's asynchronous calls
# (``send_query_prepared``) and its answer read when the socket is readable (``add_reader``); the
# connection is in autocommit mode, so the answer means committed.
#
# One statement at a time on one connection: a run that comes while another is in flight waits for
# it. The statement is prepared once per database session, and again if psycopg deallocated it (it
# answers a rollback with ``DEALLOCATE ALL`` once it has prepared statements of its own; nothing
# ran then). Errors are raised as SQLAlchemy raises the driver's (``DBAPIError``); after one the
# connection must be closed, as after any failed statement.

_BIND = re.compile(r"%\((\w+)\)s")


@functools.cache
def numbered(statement: ClauseElement, dialect: Dialect) -> tuple[bytes, tuple[str, ...], dict]:
    """`statement`'s SQL with $1, $2... for its bind parameters, their names in order, and
    the values the statement fixes itself; compiled once per dialect."""
    compiled = statement.compile(dialect=dialect)
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = _BIND.sub(number, compiled.string).replace("%%", "%")
    return sql.encode(), tuple(names), dict(compiled.params)


class SocketStatement:
    """One prepared statement, run on one PostgreSQL connection (autocommit) without
    stopping the event loop."""

    def __init__(self, connection: Connection, name: bytes, sql: bytes, label: str) -> None:
        self.connection = connection
        self.label = label  # names the statement in its errors
        dbapi_connection = connection.connection.dbapi_connection
        self._pgconn = dbapi_connection.pgconn
        self.encoding = dbapi_connection.info.encoding
        self._name, self._sql = name, sql
        self._in_flight: asyncio.Future | None = None  # the answer of the run sent last
        self._results: list[pq.PGresult] = []  # of the run in flight, read so far
        self._socket = -1  # the socket the answer is read from
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop that reads it
        self._info = connection.connection.info  # the DBAPI connection's: prepared there
        self._prepared_key = f"console.prepared.{name.decode()}"

    async def run(
        self, parameters: list[bytes | None], timed: Callable[[float], None] | None = None
    ) -> pq.PGresult:
        """Run the statement with `parameters` (text, in $ order; None: NULL) once no other
        run is in flight; its committed result. `timed` is told the seconds from sending
        it to reading its answer."""
        try:
            return await self._sent(parameters, timed)
        except DBAPIError as error:
            if not isinstance(error.orig, psycopg_errors.InvalidSqlStatementName):
                raise
            # Gone although prepared here: psycopg answers a rollback on this connection with
            # DEALLOCATE ALL once it prepared statements of its own. Nothing ran: again.
            return await self._sent(parameters, timed, prepare_first=True)

    @property
    def in_flight(self) -> bool:
        """True while a run's answer has not been read."""
        return self._in_flight is not None

    def abandon(self) -> None:
        """Stop reading a run still in flight (its sender was cancelled, the batch is over):
        the connection is invalidated, not given back to the pool mid-statement."""
        if self._in_flight is None:
            return
        self._loop.remove_reader(self._socket)
        if not self._in_flight.done():
            self._in_flight.cancel()
        self._in_flight = None
        self.connection.invalidate()

    async def _sent(self, parameters, timed, prepare_first=False) -> pq.PGresult:
        """Send a run once no other is in flight (prepared again first if asked); its
        answer, or its error as SQLAlchemy's."""
        while self._in_flight is not None:  # one statement at a time on the connection
            await asyncio.wait([self._in_flight])
        if prepare_first or not self._info.get(self._prepared_key):
            self._info[self._prepared_key] = True  # the next run waits for this one, unprepared
            try:
                await self._round_trip(lambda: self._pgconn.send_prepare(self._name, self._sql))
            except BaseException:
                self._info.pop(self._prepared_key, None)
                raise
            while self._in_flight is not None:  # a run of a cancelled sender went meanwhile
                await asyncio.wait([self._in_flight])
        send = lambda: self._pgconn.send_query_prepared(self._name, parameters)  # noqa: E731
        return await self._round_trip(send, timed)

    async def _round_trip(self, send: Callable[[], None], timed=None) -> pq.PGresult:
        """Send with `send`, then read the answer without blocking the event loop: a
        database that stops answering stops this statement, not the loop."""
        loop = asyncio.get_running_loop()
        try:
            send()
            self._pgconn.flush()
        except Exception as error:
            raise self._wrapped(error) from error
        answer = self._in_flight = loop.create_future()
        self._results = []
        started = time.perf_counter()
        self._loop = loop
        self._socket = self._pgconn.socket  # libpq closes its own when the server hangs up
        loop.add_reader(self._socket, self._read, loop, answer, started, timed)
        # A cancelled sender stops waiting; the answer is still read and the next run waits
        # for it (a mark committed then only makes its attempt look sent: ambiguous).
        return await asyncio.shield(answer)

    def _read(self, loop, answer: asyncio.Future, started: float, timed) -> None:
        """The socket is readable: take what came; once the answer is whole, hand it over."""
        pgconn = self._pgconn
        try:
            pgconn.consume_input()
            if pgconn.status == pq.ConnStatus.BAD:  # the server hung up (libpq closed it)
                raise psycopg_errors.OperationalError(
                    f"the connection was lost: {pgconn.get_error_message(self.encoding)}"
                )
            while not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:  # the answer is whole
                    loop.remove_reader(self._socket)
                    if timed is not None:
                        timed(time.perf_counter() - started)
                    self._in_flight = None
                    answer.set_result(self._checked(self._results))
                    return
                self._results.append(result)
        except Exception as error:  # noqa: BLE001 - raised to the awaiting run
            loop.remove_reader(self._socket)
            self._in_flight = None
            try:
                error = self._wrapped(error)
            finally:  # whatever happens, the run waiting for this answer gets one
                if not answer.done():
                    answer.set_exception(error)

    def _checked(self, results: list) -> pq.PGresult:
        for result in results:
            if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
                raise psycopg_errors.error_from_result(result, encoding=self.encoding)
        return results[-1]

    def _wrapped(self, error: Exception) -> Exception:
        """The driver's error as SQLAlchemy's; a broken connection is invalidated."""
        if isinstance(error, DBAPIError):
            return error
        dialect = self.connection.dialect
        if not isinstance(error, dialect.loaded_dbapi.Error):
            error = psycopg_errors.OperationalError(str(error))
        if dialect.is_disconnect(error, self.connection.connection.dbapi_connection, None):
            self.connection.invalidate(error)
        return DBAPIError.instance(
            self.label, None, error, dialect.loaded_dbapi.Error, hide_parameters=True
        )


# Marks -------------------------------------------------------------------------------------------
#
# PostgreSQL next door: the ``data_sent`` mark written on the connection's socket while the event
# loop goes on.
#
# A mark run by the driver (``console.store.records.mark_data_sent_unless_suppressed``) stops the
# event loop until PostgreSQL answers: every connection's send waits for one body's mark. Here the
# mark is sent on the socket (``SocketStatement``), so the other sends go on meanwhile. The body
# still waits for its own mark: ``mark`` returns once PostgreSQL has committed it (the connection
# is in autocommit mode: one statement, one commit).
#
# The statement is the same ``MARK_DATA_SENT_UNLESS_SUPPRESSED``, its bind parameters numbered. One
# mark at a time on one connection; after an error the connection must be closed (``StageMarks``
# does), as with any failed mark.

STATEMENT_NAME = b"console_data_sent_mark"


class SocketMarks(SocketStatement):
    """The marks of the event loop's thread on one PostgreSQL connection (autocommit)."""

    def __init__(self, connection: Connection) -> None:
        sql, self._names, self._fixed = numbered(
            s.MARK_DATA_SENT_UNLESS_SUPPRESSED, connection.dialect
        )
        super().__init__(connection, STATEMENT_NAME, sql, "data_sent mark")

    async def mark(
        self, attempt_id: int, recipient_forms: list[str], timed: Callable[[float], None]
    ) -> bool:
        """Commit that the body of `attempt_id` is about to leave, unless its recipient (either
        form) is suppressed or the sweep finished the attempt; False then. `timed` is told
        the seconds from sending the statement to reading its answer."""
        values = dict(
            self._fixed,
            b_id=attempt_id,
            b_address=recipient_forms[0],
            b_address_hash=recipient_forms[-1],
        )
        parameters = [str(values[name]).encode(self.encoding) for name in self._names]
        result = await self.run(parameters, timed)
        return result.command_tuples == 1


# Records -----------------------------------------------------------------------------------------
#
# PostgreSQL next door: the records of several attempts (``console.store.records``) written on the
# socket of the event loop's connection, the loop sending meanwhile (``SocketStatement``). The same
# statement, its arrays sent as PostgreSQL's text.


class SocketRecords(SocketStatement):
    """``record_all`` on the socket of the event loop's connection (next door): the loop
    goes on sending while PostgreSQL writes the records (``SocketStatement``)."""

    def __init__(self, connection: Connection) -> None:
        sql, self._names, self._fixed = numbered(RECORD_BATCH_IF_MOVED, connection.dialect)
        super().__init__(connection, b"console_record_batch", sql, "records")

    async def record_all(self, records: Sequence[dict[str, Any]]) -> set[int]:
        """``record_all``'s records, committed when it returns; the attempt ids recorded."""
        values = dict(self._fixed)
        values.update((name, [record[name] for record in records]) for name, _ in COLUMNS)
        result = await self.run([self._text(values[name]) for name in self._names])
        return {int(result.get_value(row, 0)) for row in range(result.ntuples)}

    def _text(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, list):
            return array_literal(value).encode(self.encoding)
        return str(value).encode(self.encoding)


def array_literal(values: Sequence[Any]) -> str:
    """PostgreSQL's text of a one-dimensional array: each element quoted (a backslash
    before each ``"`` and ``\\``), NULL for None, times in UTC as ``UTCDateTime`` binds them."""
    return "{" + ",".join("NULL" if v is None else _element(v) for v in values) + "}"


def _element(value: Any) -> str:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        value = aware.astimezone(dt.UTC).isoformat()
    text = str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
