"""Full-jitter backoff: the window doubles to the cap, the floor holds, random is injectable."""

from __future__ import annotations

import random

import pytest

from console.core.backoff import Backoff

POLICY = Backoff(base_seconds=30, cap_seconds=3600, floor_seconds=5)


@pytest.mark.parametrize(
    "failures,window",
    [(1, 30), (2, 60), (3, 120), (4, 240), (7, 1920), (8, 3600), (9, 3600), (10_000, 3600)],
)
def test_the_window_doubles_until_the_cap(failures, window):
    assert POLICY.window_seconds(failures) == window


def test_the_delay_is_the_random_fraction_of_the_window():
    assert POLICY.delay_seconds(3, random=lambda: 0.5) == 60
    assert POLICY.delay_seconds(3, random=lambda: 0.999) == pytest.approx(119.88)


def test_the_floor_holds_when_the_draw_is_small():
    assert POLICY.delay_seconds(1, random=lambda: 0.0) == 5
    assert POLICY.delay_seconds(1, random=lambda: 0.1) == 5


def test_delays_spread_over_the_whole_window():
    draw = random.Random(7).random
    delays = [POLICY.delay_seconds(4, random=draw) for _ in range(2000)]
    assert min(delays) >= 5 and max(delays) <= 240
    assert max(delays) > 230 and sum(delays) / len(delays) == pytest.approx(120, rel=0.1)


def test_never_above_the_cap():
    draw = random.Random(1).random
    assert all(POLICY.delay_seconds(n, random=draw) <= 3600 for n in range(1, 200))


@pytest.mark.parametrize("base,cap,floor", [(0, 10, 0), (10, 0, 0), (10, 100, -1), (10, 100, 200)])
def test_bad_policies_are_refused(base, cap, floor):
    with pytest.raises(ValueError):
        Backoff(base, cap, floor)
