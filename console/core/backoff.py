"""Full-jitter exponential backoff with a floor: how long a transient failure waits."""

from __future__ import annotations

import dataclasses
import random as _random
from collections.abc import Callable

# 2**64 times any sensible base is far above any cap; stop doubling there.
_MAX_EXPONENT = 64


@dataclasses.dataclass(frozen=True)
class Backoff:
    """``delay = max(floor, random(0, min(cap, base * 2**(failures - 1))))``.

    The first retry waits up to `base_seconds`, each further failure doubles the
    window until it reaches `cap_seconds`; no retry comes sooner than
    `floor_seconds` (and the floor is never above the cap).
    """

    base_seconds: float
    cap_seconds: float
    floor_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.base_seconds <= 0 or self.cap_seconds <= 0 or self.floor_seconds < 0:
            raise ValueError("backoff base and cap must be positive, the floor not negative")
        if self.floor_seconds > self.cap_seconds:
            raise ValueError("the backoff floor must not exceed the cap")

    def window_seconds(self, failures: int) -> float:
        """Return the upper bound of the random delay after `failures` failed attempts."""
        exponent = min(max(failures - 1, 0), _MAX_EXPONENT)
        return min(self.cap_seconds, self.base_seconds * 2**exponent)

    def delay_seconds(self, failures: int, random: Callable[[], float] = _random.random) -> float:
        """Return the delay before the next attempt; `random` yields a float in [0, 1)."""
        drawn = random() * self.window_seconds(failures)
        return min(max(self.floor_seconds, drawn), self.cap_seconds)
