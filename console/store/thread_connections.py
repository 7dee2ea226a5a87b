"""One writer connection per thread of a pool, all closed together between batches."""

from __future__ import annotations

import threading

from sqlalchemy import Connection, Engine

from console.store import attempt_records


class ThreadConnections:
    """``here()`` gives the calling thread its own writer connection (``attempt_records.
    writer``), opened on first use or after it was closed; ``close_all()`` closes every
    one (call it when no thread is using its connection)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._lock = threading.Lock()

    def here(self) -> Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None or connection.closed:
            connection = self._local.connection = attempt_records.writer(self._engine)
            with self._lock:
                self._opened.append(connection)
        return connection

    def close_all(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
