"""What the worker does as a send moves from stage to stage: the crash points of the
tests, and the ``data_sent`` mark committed before the body, which is also the last
check of the suppression list.

The body waits for its mark; the other connections need not: the mark is awaited on the
engine (``console.engine``), and while PostgreSQL answers the event loop goes on
with the other sends.
"""

from __future__ import annotations

from collections.abc import Callable

from console.engine import SUPPRESSED, SWEPT, Engine
from console.transports.base import OutgoingEmail
from console.vocabulary import DATA_SENT, ENVELOPE
from console.worker.crash_points import CrashPoint

SUPPRESSED_BEFORE_BODY = "recipient suppressed before its body was sent (envelope reset)"


class LeaseLost(RuntimeError):
    """The lease-expiry sweep took this attempt back before its body was handed over."""


class SuppressedBeforeBody(RuntimeError):
    """The recipient was put on the suppression list after the claim, before the body."""


class StageMarks:
    """The transport's stage callback of one worker: its marks on its engine."""

    def __init__(
        self,
        store: Engine,
        crash_if: CrashPoint,
        after_mark: Callable[[], None] | None = None,
    ) -> None:
        self._engine = store
        self._crash_if = crash_if
        self._after_mark = after_mark  # called once the mark is committed, before the body

    async def on_stage(self, email: OutgoingEmail, stage: str) -> None:
        """Commit ``data_sent`` before the body; raise (the body must not go) if it cannot."""
        if stage == ENVELOPE:
            self._crash_if("envelope")
        if stage != DATA_SENT:
            return
        refused = await self._engine.mark(email.attempt_id, email.recipient)
        if refused == SUPPRESSED:
            raise SuppressedBeforeBody(f"{email.recipient} was suppressed after the claim")
        if refused == SWEPT:
            raise LeaseLost(f"attempt {email.attempt_id} was swept before its body was sent")
        self._crash_if("data_sent")
        if self._after_mark is not None:
            self._after_mark()
