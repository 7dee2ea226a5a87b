"""PostgreSQL next door: the ``data_sent`` mark written on the connection's socket while
the event loop goes on.

A mark run by the driver (``attempt_records.mark_data_sent_unless_suppressed``) stops the
event loop until PostgreSQL answers: every connection's send waits for one body's
mark (0.27 ms of wall a message next door on two shared cores, against 0.1 ms of CPU).
Here the mark is sent on the socket (``socket_statements``), so the other sends go on
meanwhile. The body still waits for its own mark: ``mark`` returns once PostgreSQL has
committed it (the connection is in autocommit mode: one statement, one commit).

The statement is the same ``MARK_DATA_SENT_UNLESS_SUPPRESSED``, its bind parameters
numbered. One mark at a time on one connection; after an error the connection must be
closed (``StageMarks`` does), as with any failed mark.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from console.store import send_statements as s
from console.store.socket_statements import SocketStatement, numbered

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
