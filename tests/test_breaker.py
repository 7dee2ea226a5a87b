"""The lane circuit breaker: trip on a failure rate, pause, probe, close or reopen longer."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core import breaker
from console.core.breaker import (
    CLOSED,
    HALF_OPEN,
    NORMAL,
    OPEN,
    PAUSED,
    PROBE,
    BreakerPolicy,
    BreakerState,
    FailureWindow,
)

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
POLICY = BreakerPolicy(window_attempts=10, failure_rate=0.5, open_seconds=30, max_open_seconds=100)


def window_of(*outcomes: str, size: int = 10) -> FailureWindow:
    window = FailureWindow(size)
    for outcome in outcomes:
        window.record(outcome)
    return window


def seconds(after: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=after)


@pytest.mark.parametrize(
    "outcomes, trips",
    [
        ([], False),
        (["transient"] * 4, False),  # fewer than half a window: not enough to judge
        (["transient"] * 5, True),
        (["accepted"] * 5 + ["transient"] * 4, False),  # 4/9 below 0.5
        (["accepted"] * 5 + ["transient"] * 5, True),  # 5/10 reaches 0.5
        (["transient"] * 5 + ["accepted"] * 10, False),  # old failures left the window
        (["permanent"] * 3 + ["ambiguous"] * 3, True),  # anything not accepted counts
        (["accepted"] * 4 + ["transient"] + ["accepted"] * 4 + ["permanent"], False),
    ],
)
def test_trip_threshold(outcomes, trips):
    opened = breaker.should_trip(BreakerState(), window_of(*outcomes), POLICY, T0)
    assert (opened is not None) == trips
    if opened:
        assert opened.state == OPEN and opened.trips == 1
        assert opened.resume_at == seconds(30) and opened.opened_at == T0


def test_a_normal_mix_of_4yz_and_5yz_never_trips_the_default_breaker():
    policy = BreakerPolicy()  # 50 attempts, 0.5
    window = FailureWindow(policy.window_attempts)
    for number in range(10_000):
        outcome = "transient" if number % 20 == 0 else "accepted"
        window.record("permanent" if number % 100 == 1 else outcome)
        assert breaker.should_trip(BreakerState(), window, policy, T0) is None


def test_an_open_breaker_does_not_trip_again():
    state = BreakerState(OPEN, trips=1, resume_at=seconds(30))
    assert breaker.should_trip(state, window_of(*["transient"] * 10), POLICY, T0) is None


@pytest.mark.parametrize(
    "state, at, mode",
    [
        (BreakerState(), 0, NORMAL),
        (BreakerState(OPEN, 1, resume_at=seconds(30)), 29.9, PAUSED),
        (BreakerState(OPEN, 1, resume_at=seconds(30)), 30, PROBE),
        (BreakerState(HALF_OPEN, 1, resume_at=seconds(150)), 100, PAUSED),  # a probe is out
        (BreakerState(HALF_OPEN, 1, resume_at=seconds(150)), 150, PROBE),  # it never reported
    ],
)
def test_claim_mode(state, at, mode):
    assert breaker.claim_mode(state, seconds(at)) == mode


def test_a_probe_closes_or_reopens_for_longer_up_to_the_cap():
    state = breaker.should_trip(BreakerState(), window_of(*["transient"] * 10), POLICY, T0)
    pauses = []
    now = T0
    for _ in range(4):
        now = state.resume_at
        probing = breaker.start_probe(state, POLICY, now)
        assert probing.state == HALF_OPEN and breaker.claim_mode(probing, now) == PAUSED
        state = breaker.after_probe(probing, "transient", POLICY, now)
        assert state.state == OPEN
        pauses.append((state.resume_at - now).total_seconds())
    assert pauses == [60, 100, 100, 100]  # 30 s doubled per trip, capped at 100 s
    closed = breaker.after_probe(breaker.start_probe(state, POLICY, now), "accepted", POLICY, now)
    assert closed == BreakerState(CLOSED, trips=0, failure_rate=0.0)
    assert breaker.claim_mode(closed, now) == NORMAL


def test_window_keeps_only_the_last_outcomes():
    window = window_of("transient", "transient", "accepted", size=2)
    assert len(window) == 2 and window.rate() == 0.5
    window.clear()
    assert len(window) == 0 and window.rate() == 0.0
