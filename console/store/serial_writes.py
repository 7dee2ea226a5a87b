"""The T2 writes of one worker, in order, on one connection: in the event loop or a thread."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine

from console.store import attempt_records as store

# A write's round trip up to which it runs in the event loop's thread: on PostgreSQL
# next to the worker a record took 0.2-0.3 ms, and the thread cost 0.28 ms of CPU a
# message more than that (docs/benchmarks.md); a database across a network answers later.
INLINE_ROUND_TRIP_SECONDS = 0.0005


class SerialWrites:
    """The T2 records of a worker, in order, on one connection, in a thread of their own
    or in the event loop's thread.

    In the thread, a record's database round trip overlaps the sending of the next email
    instead of stopping the event loop. (The DATA_SENT mark is not queued here:
    the body must wait for it anyway, so it is committed inline.) ``post`` hands a
    write over without waiting for it and without waking the event loop when it is
    done; ``drain`` waits for every write posted so far and raises the first error.

    On SQLite a write is local work, not a round trip, and a thread would only contend
    for the GIL with the event loop: the writes then run in the event loop's thread, as
    soon as the sending coroutine waits for the relay's next reply (``call_soon``), so
    they fill that wait; the same order and the same error handling (measured in
    docs/benchmarks.md). On PostgreSQL the worker chooses between batches
    (``run_inline``): in the event loop's thread while the database answers within
    ``INLINE_ROUND_TRIP_SECONDS`` (the thread's hand-overs then cost more CPU than the
    round trip stalls the sends), in the thread when it is further away.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._always_inline = engine.dialect.name == "sqlite"
        self._inline = self._always_inline
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-writes")
        self._connection: Connection | None = None
        self._errors: list[BaseException] = []
        self._pending: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._scheduled = False  # a run of the pending writes is due in the event loop

    @property
    def inline(self) -> bool:
        """True while the writes run in the event loop's thread."""
        return self._inline

    def run_inline(self, inline: bool) -> None:
        """Between batches, with nothing pending: run the next writes in the event loop's
        thread (True) or in the writes thread (False; not on SQLite)."""
        if self._pending:
            raise RuntimeError("writes are still pending: drain them first")
        self._inline = self._always_inline or inline

    def post(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(connection, *args)`` after every write before it; do not wait.

        An error is kept for the next ``drain``; the writes after it still run.
        """
        if self._inline:
            self._pending.append((function, args))
            self._schedule_pending()
        else:
            self._executor.submit(self._call_keeping_errors, function, args)

    async def drain(self) -> None:
        """Wait until every write posted so far is done; raise the first error among them."""
        if self._inline:
            self._run_pending()
        else:
            await asyncio.get_running_loop().run_in_executor(self._executor, _nothing)
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first

    def _schedule_pending(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: nothing to overlap, write now
            self._run_pending()
            return
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._run_pending)

    def _run_pending(self) -> None:
        self._scheduled = False
        while self._pending:
            function, args = self._pending.popleft()
            self._call_keeping_errors(function, args)

    def _call_keeping_errors(self, function: Callable[..., Any], args: tuple) -> None:
        try:
            self._call(function, args)
        except BaseException as error:  # noqa: BLE001 - raised again by drain()
            self._errors.append(error)

    def _call(self, function: Callable[..., Any], args: tuple) -> Any:
        if self._connection is None:
            self._connection = store.writer(self._engine)
        try:
            return function(self._connection, *args)
        except BaseException:
            self._close()  # rolls back; the next write starts on a fresh connection
            raise

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def release_connection(self) -> None:
        """Give the connection back to the pool between batches."""
        if self._inline:
            self._run_pending()
            self._close()
        else:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._close)

    def shutdown(self) -> None:
        self._run_pending()
        self._executor.submit(self._close).result()
        self._executor.shutdown()


def inline_for(round_trip_seconds: float | None) -> bool:
    """Whether a database that answers a write in `round_trip_seconds` (None: not yet
    known) is near enough for the writes to run in the event loop's thread."""
    return round_trip_seconds is not None and round_trip_seconds <= INLINE_ROUND_TRIP_SECONDS


def _nothing() -> None:
    return None
