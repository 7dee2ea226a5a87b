"""``CONSOLE_TEST_CRASH_AT``: a point, or ``point:N`` for the N-th time it is reached."""

from __future__ import annotations

import signal

import pytest

from console.worker import sending
from console.worker.sending import CrashPoint


@pytest.mark.parametrize("given", ["nowhere", "before_record:0", "before_record:x", "envelope:²"])
def test_an_unknown_point_or_count_is_refused(given):
    with pytest.raises(ValueError, match="unknown crash point"):
        CrashPoint(given)


@pytest.mark.parametrize(("given", "kills_at"), [("envelope", 1), ("envelope:3", 3), (None, None)])
def test_the_point_kills_the_nth_time_it_is_reached(monkeypatch, given, kills_at):
    kills = []
    monkeypatch.setattr(sending.os, "kill", lambda pid, sig: kills.append(sig))
    crash = CrashPoint(given)
    reached = []
    for n in range(1, 6):
        crash("claimed")
        crash("envelope")
        if kills and not reached:
            reached.append(n)
    assert reached == ([kills_at] if kills_at else [])
    assert kills == ([signal.SIGKILL] if kills_at else [])
