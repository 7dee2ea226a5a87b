"""What the worker does as a send moves from stage to stage: the crash points of the
tests, and the ``data_sent`` mark committed before the body, which is also the last
check of the suppression list.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine

from console.store import attempt_records, suppression_lookup
from console.transports.base import OutgoingEmail
from console.vocabulary import DATA_SENT, ENVELOPE
from console.worker.crash_points import CrashPoint

SUPPRESSED_BEFORE_BODY = "recipient suppressed before its body was sent (envelope reset)"


class LeaseLost(RuntimeError):
    """The lease-expiry sweep took this attempt back before its body was handed over."""


class SuppressedBeforeBody(RuntimeError):
    """The recipient was put on the suppression list after the claim, before the body."""


class StageMarks:
    """The transport's stage callback of one worker, on one connection per batch."""

    def __init__(
        self, engine: Engine, crash_if: CrashPoint, after_mark: Callable[[], None] | None = None
    ) -> None:
        self._engine = engine
        self._crash_if = crash_if
        self._after_mark = after_mark  # called once the mark is committed, before the body
        self._connection: Connection | None = None
        self._mark_seconds: float | None = None

    async def on_stage(self, email: OutgoingEmail, stage: str) -> None:
        """Commit ``data_sent`` before the body; raise (the body must not go) if it cannot."""
        if stage == ENVELOPE:
            self._crash_if("envelope")
        if stage != DATA_SENT:
            return
        connection = self._marks_connection()
        forms = suppression_lookup.recipient_forms(email.recipient)
        started = time.perf_counter()
        marked = attempt_records.mark_data_sent_unless_suppressed(
            connection, email.attempt_id, forms
        )
        self._note_mark_seconds(time.perf_counter() - started)
        if not marked:
            if suppression_lookup.is_suppressed_now(connection, email.recipient):
                raise SuppressedBeforeBody(f"{email.recipient} was suppressed after the claim")
            raise LeaseLost(f"attempt {email.attempt_id} was swept before its body was sent")
        self._crash_if("data_sent")
        if self._after_mark is not None:
            self._after_mark()

    @property
    def mark_seconds(self) -> float | None:
        """How long a mark's statement and commit take, a moving average (None before one)."""
        return self._mark_seconds

    def _note_mark_seconds(self, seconds: float) -> None:
        previous = self._mark_seconds
        self._mark_seconds = seconds if previous is None else 0.9 * previous + 0.1 * seconds

    def close(self) -> None:
        """Give the batch's connection back to the pool."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _marks_connection(self) -> Connection:
        """The connection of this batch's marks, in the event loop's thread."""
        if self._connection is None:
            self._connection = attempt_records.writer(self._engine)
        return self._connection
