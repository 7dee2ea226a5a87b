"""What the worker does as a send moves from stage to stage: the crash points of the
tests, and the ``data_sent`` mark committed before the body, which is also the last
check of the suppression list.

The body waits for its mark; the other connections need not. To a database across
a network (a mark slower than ``threads.INLINE_ROUND_TRIP_SECONDS``, or not
yet timed) each mark runs in a thread of a small pool, on that thread's own
connection, while the event loop goes on with the other sends. To PostgreSQL next
door it is written on the socket of the event loop's connection and its answer read
when it comes (``store.pg_socket``): the loop goes on meanwhile, without a
thread's hand-over, which cost more than the round trip there. On SQLite (no round
trip) it runs in the event loop's thread. The worker chooses between batches
(``run_inline``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from console.store import records, suppressions
from console.store.database import send_paths
from console.store.threads import ThreadConnections
from console.transports.base import OutgoingEmail
from console.vocabulary import DATA_SENT, ENVELOPE
from console.worker.crash_points import CrashPoint

if TYPE_CHECKING:
    from console.store.pg_socket import SocketMarks

SUPPRESSED_BEFORE_BODY = "recipient suppressed before its body was sent (envelope reset)"
# Marks in flight at once in threads: a database connection each, from the engine's
# pool (10 at most), which the claim and the records use too.
MARK_THREADS_LIMIT = 4
SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused
# The marks the database's distance is judged by: the fastest of the last ones, so a
# slow one (a statement prepared, a pause of the machine) does not count as distance.
RECENT_MARKS = 32


class LeaseLost(RuntimeError):
    """The lease-expiry sweep took this attempt back before its body was handed over."""


class SuppressedBeforeBody(RuntimeError):
    """The recipient was put on the suppression list after the claim, before the body."""


class StageMarks:
    """The transport's stage callback of one worker: its marks on one connection per
    batch in the event loop's thread, or on one per mark thread."""

    def __init__(
        self,
        engine: Engine,
        crash_if: CrashPoint,
        after_mark: Callable[[], None] | None = None,
        threads: int = 1,
    ) -> None:
        self._engine = engine
        self._crash_if = crash_if
        self._after_mark = after_mark  # called once the mark is committed, before the body
        self._mark_seconds: float | None = None
        self._recent_marks: collections.deque[float] = collections.deque(maxlen=RECENT_MARKS)
        paths = send_paths(engine)
        self._always_inline = paths.one_writer
        self._inline = self._always_inline
        self._threads = max(1, min(threads, MARK_THREADS_LIMIT))
        self._executor: ThreadPoolExecutor | None = None
        self._connections = ThreadConnections(engine)  # the event loop's, each thread's
        self._on_socket = paths.socket_next_door  # next door: pg_socket
        self._socket: SocketMarks | None = None  # on the event loop's connection

    @property
    def inline(self) -> bool:
        """True while the marks run in the event loop's thread."""
        return self._inline

    def run_inline(self, inline: bool) -> None:
        """Between batches: the next marks in the event loop's thread (True) or in the
        mark threads (False; never on SQLite)."""
        self._inline = self._always_inline or inline

    async def on_stage(self, email: OutgoingEmail, stage: str) -> None:
        """Commit ``data_sent`` before the body; raise (the body must not go) if it cannot."""
        if stage == ENVELOPE:
            self._crash_if("envelope")
        if stage != DATA_SENT:
            return
        if self._inline and self._on_socket:
            refused = await self._mark_on_socket(email.attempt_id, email.recipient)
        elif self._inline:
            refused = self._mark(email.attempt_id, email.recipient)
        else:
            refused = await asyncio.get_running_loop().run_in_executor(
                self._mark_executor(), self._mark, email.attempt_id, email.recipient
            )
        if refused == SUPPRESSED:
            raise SuppressedBeforeBody(f"{email.recipient} was suppressed after the claim")
        if refused == SWEPT:
            raise LeaseLost(f"attempt {email.attempt_id} was swept before its body was sent")
        self._crash_if("data_sent")
        if self._after_mark is not None:
            self._after_mark()

    def _mark(self, attempt_id: int, recipient: str) -> str | None:
        """Commit the mark on this thread's connection: None, or why it was refused."""
        connection = self._connections.here()
        try:
            forms = suppressions.recipient_forms(recipient)
            started = time.perf_counter()
            marked = records.mark_data_sent_unless_suppressed(connection, attempt_id, forms)
            self._note_mark_seconds(time.perf_counter() - started)
            return None if marked else _why_refused(connection, recipient)
        except BaseException:
            connection.close()  # the next mark starts on a fresh connection
            raise

    async def _mark_on_socket(self, attempt_id: int, recipient: str) -> str | None:
        """The mark on the event loop's connection, the loop going on while PostgreSQL
        answers (``pg_socket.SocketMarks``): None, or why it was refused."""
        connection = self._connections.here()
        try:
            if self._socket is None or self._socket.connection is not connection:
                from console.store.pg_socket import SocketMarks  # psycopg: PostgreSQL only

                self._socket = SocketMarks(connection)
            forms = suppressions.recipient_forms(recipient)
            marked = await self._socket.mark(attempt_id, forms, self._note_mark_seconds)
            if marked:
                return None
            # Not on this connection: another send's mark may be on its socket by now.
            with self._engine.connect() as elsewhere:
                return _why_refused(elsewhere, recipient)
        except Exception:
            self._socket = None
            connection.close()  # the next mark starts on a fresh connection
            raise

    def _mark_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="console-mark")
        return self._executor

    @property
    def mark_seconds(self) -> float | None:
        """How long a mark's statement and commit take: the fastest of the last
        ``RECENT_MARKS`` (None before one)."""
        return self._mark_seconds

    def _note_mark_seconds(self, seconds: float) -> None:
        self._recent_marks.append(seconds)
        self._mark_seconds = min(self._recent_marks)

    def close(self) -> None:
        """Give the connections back to the pool (between batches: no mark in flight, but
        for one whose sender was cancelled: that connection is invalidated)."""
        if self._socket is not None:
            self._socket.abandon()
            self._socket = None
        self._connections.close_all()

    def shutdown(self) -> None:
        self.close()
        if self._executor is not None:
            self._executor.shutdown()


def _why_refused(connection, recipient: str) -> str:
    """A mark changed no row: the recipient was suppressed, or the sweep took the attempt."""
    return SUPPRESSED if suppressions.is_suppressed_now(connection, recipient) else SWEPT
