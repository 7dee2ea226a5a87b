"""PostgreSQL next door: the records of several attempts (``record_arrays``) written on
the socket of the event loop's connection, the loop sending meanwhile
(``socket_statements``). The same statement, its arrays sent as PostgreSQL's text."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from console.store.record_arrays import COLUMNS, RECORD_BATCH_IF_MOVED
from console.store.socket_statements import SocketStatement, numbered


class SocketRecords(SocketStatement):
    """``record_all`` on the socket of the event loop's connection (next door): the loop
    goes on sending while PostgreSQL writes the records (``socket_statements``)."""

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
