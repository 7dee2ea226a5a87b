"""The circuit breaker of a lane (retry budget), as pure decisions.

``closed``: mail flows; each worker keeps a window of its last N outcomes. When
the share of provider failures reaches the threshold (with at least half a
window seen), the breaker opens: the lane pauses for ``open_seconds``, doubled
on each consecutive trip up to ``max_open_seconds``. When the pause is over one
worker moves it to ``half_open`` and sends a single probe; a probe the provider
answers properly closes the breaker, a failing one opens it again.

A provider failure is anything but an acceptance or a refusal about one
message or recipient: no connection, a timeout, an unknown outcome, 421,
authentication refused, HTTP 401/403/429/5xx. A mailbox that is busy (450-452)
or unknown (550-553), or a request the provider judged invalid (HTTP 400, 404,
422), shows the provider at work; per-domain back-off deals with the 4yz.
A probe that never reports (its worker died) is given up after
``probe_timeout_seconds`` and another probe may go.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import deque

from console.vocabulary import ACCEPTED, CLOSED, HALF_OPEN, OPEN

# What a worker may do with a lane right now.
NORMAL = "normal"  # claim as usual
PAUSED = "paused"  # claim nothing from this lane
PROBE = "probe"  # try to become the one worker that sends a single probe


@dataclasses.dataclass(frozen=True)
class BreakerPolicy:
    window_attempts: int = 50
    failure_rate: float = 0.5
    open_seconds: float = 30.0
    max_open_seconds: float = 900.0
    probe_timeout_seconds: float = 120.0

    @property
    def min_attempts(self) -> int:
        """How many outcomes a window needs before its rate may trip the breaker."""
        return max(1, self.window_attempts // 2)

    def pause_seconds(self, trips: int) -> float:
        """Return how long the lane pauses after its `trips`-th consecutive trip."""
        exponent = min(max(trips - 1, 0), 32)
        return min(self.open_seconds * 2**exponent, self.max_open_seconds)


@dataclasses.dataclass(frozen=True)
class BreakerState:
    state: str = CLOSED
    trips: int = 0  # consecutive openings without an accepted probe
    failure_rate: float | None = None
    opened_at: dt.datetime | None = None
    resume_at: dt.datetime | None = None  # open: a probe may go; half open: probe given up


# Refusals about one recipient or one message: the provider is up and answering.
MESSAGE_LEVEL_CODES = frozenset({450, 451, 452, 550, 551, 552, 553, 400, 404, 422})


def is_provider_failure(outcome: str, code: int | None, message_level: bool = False) -> bool:
    """Return whether an attempt's outcome counts against the provider.

    `message_level`: the refusal was about this message alone (e.g. too big, or an
    address the relay cannot carry), whatever its code.
    """
    return outcome != ACCEPTED and not message_level and code not in MESSAGE_LEVEL_CODES


class FailureWindow:
    """Whether each of the last `size` attempts seen by one worker was a provider failure."""

    def __init__(self, size: int) -> None:
        self._outcomes: deque[bool] = deque(maxlen=size)

    def record(self, outcome: str, code: int | None = None, message_level: bool = False) -> None:
        self._outcomes.append(is_provider_failure(outcome, code, message_level))

    def rate(self) -> float:
        """Return the share of provider failures (0 when empty)."""
        return sum(self._outcomes) / len(self._outcomes) if self._outcomes else 0.0

    def __len__(self) -> int:
        return len(self._outcomes)

    def clear(self) -> None:
        self._outcomes.clear()


def should_trip(
    state: BreakerState, window: FailureWindow, policy: BreakerPolicy, now: dt.datetime
) -> BreakerState | None:
    """Return the opened state when a closed breaker's window crossed the threshold."""
    if state.state != CLOSED or len(window) < policy.min_attempts:
        return None
    rate = window.rate()
    if rate < policy.failure_rate:
        return None
    return _opened(state.trips + 1, rate, policy, now)


def _opened(trips: int, rate: float | None, policy: BreakerPolicy, now: dt.datetime):
    pause = dt.timedelta(seconds=policy.pause_seconds(trips))
    return BreakerState(OPEN, trips, rate, opened_at=now, resume_at=now + pause)


def trip_now(state: BreakerState, policy: BreakerPolicy, now: dt.datetime) -> BreakerState:
    """Open at once, whatever the window: the relay refused the session itself."""
    return _opened(state.trips + 1, state.failure_rate, policy, now)


def claim_mode(state: BreakerState, now: dt.datetime) -> str:
    """Say whether a worker may claim from the lane, must wait, or may try to probe."""
    if state.state == CLOSED:
        return NORMAL
    if state.resume_at is not None and now >= state.resume_at:
        return PROBE
    return PAUSED


def start_probe(state: BreakerState, policy: BreakerPolicy, now: dt.datetime) -> BreakerState:
    """Return the half-open state of the worker that sends the probe."""
    give_up_at = now + dt.timedelta(seconds=policy.probe_timeout_seconds)
    return dataclasses.replace(state, state=HALF_OPEN, resume_at=give_up_at)


def after_probe(
    state: BreakerState,
    outcome: str,
    policy: BreakerPolicy,
    now: dt.datetime,
    code: int | None = None,
) -> BreakerState:
    """Close when the provider answered the probe properly; otherwise open again, for longer."""
    if not is_provider_failure(outcome, code):
        return BreakerState(CLOSED, trips=0, failure_rate=0.0)
    return _opened(state.trips + 1, state.failure_rate, policy, now)
