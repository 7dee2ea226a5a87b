"""Where the records run: in order on one connection, in the event loop or a thread of their own."""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine

from console.store import records

# Serial writes -----------------------------------------------------------------------------------
#
# The T2 writes of one worker, in order, on one connection: in the event loop or a thread.

# A write's round trip up to which it runs in the event loop's thread: on PostgreSQL
# next to the worker a record took 0.2-0.3 ms, and the thread cost 0.28 ms of CPU a
# message more than that (docs/benchmarks.md); a database across a network answers later.
INLINE_ROUND_TRIP_SECONDS = 0.0005
# Records in flight at once in threads: a database connection each, from the engine's
# pool (10 at most), shared with the marks (worker.stage_marks) and the claims.
WRITE_THREADS_LIMIT = 4
# How long a record waits for others to go with it in one statement (``post_grouped``).
GROUP_WAIT_SECONDS = 0.01


class SerialWrites:
    """The T2 records of a worker: in the event loop's thread, in order, on one connection;
    or in threads of their own, each on its connection.

    In a thread, a record's database round trip overlaps the sending of the next email
    instead of stopping the event loop. (The DATA_SENT mark is not queued here: the
    body must wait for it, see ``worker.stage_marks``.) ``post`` hands a write over
    without waiting for it and without waking the event loop when it is done; ``drain``
    waits for every write posted so far and raises the first error. With ``threads``
    above 1 (a worker with several connections) up to that many records overlap, in no
    set order: each is a compare-and-set of its own intent's lease, so one record never
    waits for another's round trip to a database across a network.

    On SQLite a write is local work, not a round trip, and a thread would only contend
    for the GIL with the event loop: the writes then run in the event loop's thread, as
    soon as the sending coroutine waits for the relay's next reply (``call_soon``), so
    they fill that wait; the same order and the same error handling (measured in
    docs/benchmarks.md). On PostgreSQL the worker chooses between batches
    (``run_inline``): in the event loop's thread while the database answers within
    ``INLINE_ROUND_TRIP_SECONDS`` (the thread's hand-overs then cost more CPU than the
    round trip stalls the sends), in the thread when it is further away. Next door the
    records of several sends go in one statement (``post_grouped``).
    """

    def __init__(self, engine: Engine, threads: int = 1, group: int = 1) -> None:
        self._engine = engine
        self._always_inline = engine.dialect.name == "sqlite"
        self._inline = self._always_inline
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, min(threads, WRITE_THREADS_LIMIT)),
            thread_name_prefix="console-writes",
        )
        self._connections = ThreadConnections(engine)  # the event loop's, each thread's
        self._posted: list[Future] = []  # to the threads, since the last drain
        self._errors: list[BaseException] = []
        # (function, its arguments, grouped, its form on the socket or None): grouped, the
        # arguments are one item of many
        self._pending: collections.deque[tuple] = collections.deque()
        self._on_socket: asyncio.Task | None = None  # a write on the socket, not yet answered
        self._on_socket_items = 0  # the grouped items it carries
        self._scheduled = False  # a run of the pending writes is due in the event loop
        self._group_size = 1 if self._always_inline else max(1, group)
        self._grouped = 0  # grouped writes pending
        self._timer: asyncio.TimerHandle | None = None  # the run of a group not yet full

    @property
    def inline(self) -> bool:
        """True while the writes run in the event loop's thread."""
        return self._inline

    def run_inline(self, inline: bool) -> None:
        """Between batches, with nothing pending: run the next writes in the event loop's
        thread (True) or in the writes thread (False; not on SQLite)."""
        if self._pending or self._on_socket is not None:
            raise RuntimeError("writes are still pending: drain them first")
        self._inline = self._always_inline or inline

    def post(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function(connection, *args)`` after every write before it; do not wait.

        An error is kept for the next ``drain``; the writes after it still run.
        """
        if self._inline:
            self._pending.append((function, args, False, None))
            self._schedule_pending()
        else:
            self._posted.append(self._executor.submit(self._call_keeping_errors, function, args))

    def post_grouped(
        self,
        function: Callable[..., Any],
        item: Any,
        on_socket: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        """Like ``post``, for a write ``function(connection, items)`` that does several
        items at once (the records: one statement for all, ``records.record_all``).

        In the event loop's thread next to PostgreSQL, up to ``group`` items (the worker's
        ``CONSOLE_RECORD_GROUP``) wait for each other, ``GROUP_WAIT_SECONDS`` at most,
        and go in one call: one round trip and one commit instead of one each, while the
        sends go on. With `on_socket` (the same write, awaited on the connection's
        socket) the event loop goes on while the database answers; the writes after it
        wait for its answer, and the items posted meanwhile make the next group. On
        SQLite, in the threads and with a group of 1 each item goes alone, as ``post``
        runs it.
        """
        if not self._inline or self._group_size == 1:
            self.post(function, [item])
            return
        self._pending.append((function, item, True, on_socket))
        self._grouped += 1
        if self._grouped >= self._group_size:
            self._schedule_pending()
        elif self._timer is None and not self._scheduled:
            self._wait_for_more()

    @property
    def waiting(self) -> int:
        """Grouped items posted and not yet written: pending, or on the socket."""
        return self._grouped + (self._on_socket_items if self._on_socket is not None else 0)

    async def room(self) -> None:
        """Wait while a group is written on the socket and a full group waits behind it:
        outcomes never pile up beyond two groups (what a kill can leave unrecorded)."""
        while self._on_socket is not None and self._grouped >= self._group_size:
            await asyncio.wait([self._on_socket])

    async def drain(self) -> None:
        """Wait until every write posted so far is done; raise the first error among them."""
        self._run_pending()
        while self._on_socket is not None:
            await asyncio.wait([self._on_socket])
            self._run_pending()  # the writes that waited for it
        posted, self._posted = self._posted, []
        if posted:
            await asyncio.wrap_future(_all_done(posted))
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first

    def _schedule_pending(self) -> None:
        loop = _running_loop()
        if loop is None:  # no event loop: nothing to overlap, write now
            self._run_pending()
            return
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._run_pending)

    def _run_pending(self) -> None:
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._on_socket is not None:
            return  # its end resumes the writes that wait (_resume_after_socket)
        while self._pending and self._on_socket is None:
            function, args, grouped, on_socket = self._pending.popleft()
            if grouped:  # with the grouped items of the same write right after it
                args = (self._group_from(function, args),)
                self._grouped -= len(args[0])
                loop = _running_loop()
                if on_socket is not None and loop is not None:
                    self._on_socket = loop.create_task(self._socket_write(on_socket, args))
                    self._on_socket_items = len(args[0])
                    return
            self._call_keeping_errors(function, args)

    def _group_from(self, function: Callable[..., Any], first: Any) -> list[Any]:
        """`first` and the grouped items of `function` pending right after it, a group's
        worth at most (a sender that never yields may have posted many)."""
        items = [first]
        pending = self._pending
        while len(items) < self._group_size and pending and pending[0][2]:
            if pending[0][0] != function:
                break
            items.append(pending.popleft()[1])
        return items

    async def _socket_write(self, on_socket: Callable[..., Awaitable[Any]], args: tuple) -> None:
        """Await a write on the socket of the event loop's connection; then the writes
        that waited for it."""
        connection = self._connections.here()
        try:
            await on_socket(connection, *args)
        except Exception as error:  # noqa: BLE001 - raised again by drain()
            connection.close()  # the next write starts on a fresh connection
            self._errors.append(error)
        except BaseException:  # cancelled (the event loop closing): nothing more from here
            self._on_socket = None
            raise
        self._on_socket = None
        self._resume_after_socket()

    def _resume_after_socket(self) -> None:
        """After a write on the socket: a full group, or a plain write waiting, go now; a
        group not yet full waits for more, ``GROUP_WAIT_SECONDS`` at most."""
        if self._grouped >= self._group_size or not all(entry[2] for entry in self._pending):
            self._run_pending()
        elif self._pending and self._timer is None:
            self._wait_for_more()

    def _wait_for_more(self) -> None:
        """A group not yet full goes ``GROUP_WAIT_SECONDS`` from now, unless filled first."""
        loop = _running_loop()
        if loop is None:  # no event loop: nothing to wait for, write now
            self._run_pending()
            return
        self._timer = loop.call_later(GROUP_WAIT_SECONDS, self._run_pending)

    def _call_keeping_errors(self, function: Callable[..., Any], args: tuple) -> None:
        try:
            self._call(function, args)
        except BaseException as error:  # noqa: BLE001 - raised again by drain()
            self._errors.append(error)

    def _call(self, function: Callable[..., Any], args: tuple) -> Any:
        connection = self._connections.here()
        try:
            return function(connection, *args)
        except BaseException:
            connection.close()  # rolls back; the next write starts on a fresh connection
            raise

    async def release_connection(self) -> None:
        """Give the connections back to the pool between batches (after ``drain``)."""
        await self.drain()
        self._connections.close_all()

    def shutdown(self) -> None:
        self._run_pending()
        _all_done(self._posted).result()
        self._posted = []
        self._executor.shutdown()
        self._connections.close_all()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def inline_for(round_trip_seconds: float | None) -> bool:
    """Whether a database that answers a write in `round_trip_seconds` (None: not yet
    known) is near enough for the writes to run in the event loop's thread."""
    return round_trip_seconds is not None and round_trip_seconds <= INLINE_ROUND_TRIP_SECONDS


def _all_done(futures: list[Future]) -> Future:
    """A future done when every one of `futures` is (their errors are kept elsewhere)."""
    done: Future = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            done.set_result(None)

    if not futures:
        done.set_result(None)
    for future in futures:
        future.add_done_callback(one_done)
    return done


# Thread connections ------------------------------------------------------------------------------
#
# One writer connection per thread of a pool, all closed together between batches.


class ThreadConnections:
    """``here()`` gives the calling thread its own writer connection (``records.
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
            connection = self._local.connection = records.writer(self._engine)
            with self._lock:
                self._opened.append(connection)
        return connection

    def close_all(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
