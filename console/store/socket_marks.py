"""PostgreSQL next door: the ``data_sent`` mark written on the connection's socket while
the event loop goes on.

A mark run by the driver (``attempt_records.mark_data_sent_unless_suppressed``) stops the
event loop until PostgreSQL answers: every connection's send waits for one body's
mark (0.27 ms of wall a message next door on two shared cores, against 0.1 ms of CPU).
Here the mark is sent with libpq's asynchronous calls (``send_query_prepared``) and its
answer read when the socket is readable (``add_reader``), so the other sends go on
meanwhile. The body still waits for its own mark: ``mark`` returns once PostgreSQL has
committed it (the connection is in autocommit mode: one statement, one commit).

One statement at a time on one connection: a mark that comes while another is in
flight waits for it. The statement is the same ``MARK_DATA_SENT_UNLESS_SUPPRESSED``,
its bind parameters numbered, prepared once per database session. Errors are raised
as SQLAlchemy raises the driver's (``DBAPIError``); after one the connection must be
closed (``StageMarks`` does), as with any failed mark.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Callable

from psycopg import errors as psycopg_errors
from psycopg import pq
from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from console.store import send_statements as s

STATEMENT_NAME = b"console_data_sent_mark"
_PREPARED = "console.socket_mark_prepared"  # in the DBAPI connection's info: prepared there
_BIND = re.compile(r"%\((\w+)\)s")


@functools.cache
def _numbered(dialect: Dialect) -> tuple[bytes, tuple[str, ...], dict]:
    """The mark's SQL with $1, $2... for its bind parameters, their names in order, and
    the values the statement fixes itself (the stage); compiled once per dialect."""
    compiled = s.MARK_DATA_SENT_UNLESS_SUPPRESSED.compile(dialect=dialect)
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = _BIND.sub(number, compiled.string).replace("%%", "%")
    return sql.encode(), tuple(names), dict(compiled.params)


class SocketMarks:
    """The marks of the event loop's thread on one PostgreSQL connection (autocommit)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        dbapi_connection = connection.connection.dbapi_connection
        self._pgconn = dbapi_connection.pgconn
        self._encoding = dbapi_connection.info.encoding
        sql, self._names, self._fixed = _numbered(connection.dialect)
        self._in_flight: asyncio.Future | None = None  # the answer of the mark sent last
        self._results: list[pq.PGresult] = []  # of the mark in flight, read so far
        self._socket = -1  # the socket the answer is read from
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop that reads it
        self._sql = sql
        info = connection.connection.info
        if not info.get(_PREPARED):
            self._prepare()
            info[_PREPARED] = True

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
        parameters = [str(values[name]).encode(self._encoding) for name in self._names]
        try:
            result = await self._sent(parameters, timed)
        except DBAPIError as error:
            if not isinstance(error.orig, psycopg_errors.InvalidSqlStatementName):
                raise
            # Gone although prepared here: psycopg answers a rollback on this connection with
            # DEALLOCATE ALL once it prepared statements of its own. Nothing ran: again.
            result = await self._sent(parameters, timed, prepare_first=True)
        return result.command_tuples == 1

    async def _sent(
        self, parameters: list[bytes], timed: Callable[[float], None], prepare_first=False
    ) -> pq.PGresult:
        """Send the mark once no other is in flight (prepared again first if asked); its
        answer, or its error as SQLAlchemy's."""
        while self._in_flight is not None:  # one statement at a time on the connection
            await asyncio.wait([self._in_flight])
        if prepare_first:  # nothing in flight: the blocking prepare reads only its own answer
            self._prepare()
        loop = asyncio.get_running_loop()
        try:
            self._pgconn.send_query_prepared(STATEMENT_NAME, parameters)
            self._pgconn.flush()
        except Exception as error:
            raise self._wrapped(error) from error
        answer = self._in_flight = loop.create_future()
        self._results = []
        started = time.perf_counter()
        self._loop = loop
        self._socket = self._pgconn.socket  # libpq closes its own when the server hangs up
        loop.add_reader(self._socket, self._read, loop, answer, started, timed)
        # A cancelled sender stops waiting; the answer is still read and the next mark
        # waits for it (a mark committed then only makes its attempt look sent: ambiguous).
        return await asyncio.shield(answer)

    @property
    def in_flight(self) -> bool:
        """True while a mark's answer has not been read."""
        return self._in_flight is not None

    def abandon(self) -> None:
        """Stop reading a mark still in flight (its sender was cancelled, the batch is over):
        the connection is invalidated, not given back to the pool mid-statement."""
        if self._in_flight is None:
            return
        self._loop.remove_reader(self._socket)
        if not self._in_flight.done():
            self._in_flight.cancel()
        self._in_flight = None
        self.connection.invalidate()

    def _read(self, loop, answer: asyncio.Future, started: float, timed) -> None:
        """The socket is readable: take what came; once the answer is whole, hand it over."""
        pgconn = self._pgconn
        try:
            pgconn.consume_input()
            if pgconn.status == pq.ConnStatus.BAD:  # the server hung up (libpq closed it)
                raise psycopg_errors.OperationalError(
                    f"the connection was lost: {pgconn.get_error_message(self._encoding)}"
                )
            while not pgconn.is_busy():
                result = pgconn.get_result()
                if result is None:  # the answer is whole
                    loop.remove_reader(self._socket)
                    timed(time.perf_counter() - started)
                    self._in_flight = None
                    answer.set_result(self._checked(self._results))
                    return
                self._results.append(result)
        except Exception as error:  # noqa: BLE001 - raised to the awaiting mark
            loop.remove_reader(self._socket)
            self._in_flight = None
            try:
                error = self._wrapped(error)
            finally:  # whatever happens, the mark waiting for this answer gets one
                if not answer.done():
                    answer.set_exception(error)

    def _checked(self, results: list) -> pq.PGresult:
        for result in results:
            if result.status != pq.ExecStatus.COMMAND_OK:
                raise psycopg_errors.error_from_result(result, encoding=self._encoding)
        return results[-1]

    def _prepare(self) -> None:
        """Prepare the statement on this session (blocking; once per connection, unless the
        driver deallocated it)."""
        try:
            self._pgconn.send_prepare(STATEMENT_NAME, self._sql)
            results = []
            while (result := self._pgconn.get_result()) is not None:
                results.append(result)
            self._checked(results)
        except Exception as error:
            raise self._wrapped(error) from error

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
            "data_sent mark", None, error, dialect.loaded_dbapi.Error, hide_parameters=True
        )
