"""Test-only: ``CONSOLE_TEST_CRASH_AT=<point>`` makes the worker SIGKILL itself at that point.

The crash tests kill a real worker process at each stage of a send this way,
restart it, and check that nothing was lost or sent twice.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("console.worker.loop")

CRASH_POINTS = (
    "claimed",
    "envelope",
    "data_sent",
    "before_record",
)


class CrashPoint:
    """Called at each point of a send; kills the process at the one it was given."""

    def __init__(self, point: str | None) -> None:
        if point is not None and point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}: expected one of {CRASH_POINTS}")
        self.point = point

    def __call__(self, reached: str) -> None:
        if reached == self.point:
            log.warning("CONSOLE_TEST_CRASH_AT=%s: killing this worker now", reached)
            os.kill(os.getpid(), signal.SIGKILL)
