"""How far the database is, as the PostgreSQL send store judges it from the round trips it
times between batches: by the fastest recent one, so one slow round trip (a pause of the
machine) does not make a database next door look far for batches on end, and a far one
never looks near. Far means the worker claims its next batch ahead."""

from __future__ import annotations

from console.store.send_store import RECENT_ROUND_TRIPS, RoundTrips


def timed(*seconds: float) -> RoundTrips:
    round_trips = RoundTrips()
    for each in seconds:
        round_trips.note(each)
    return round_trips


def test_before_any_round_trip_the_database_may_be_far():
    assert timed().far


def test_one_slow_first_round_trip_does_not_make_a_near_database_look_far():
    assert not timed(0.02, 0.0002, 0.0003).far


def test_a_far_database_stays_far_whatever_the_spread():
    assert timed(0.003, 0.0025, 0.009, 0.004).far


def test_a_database_that_moved_away_is_seen_far_once_its_near_round_trips_are_old():
    round_trips = timed(*[0.0002] * RECENT_ROUND_TRIPS)
    assert not round_trips.far
    for _ in range(RECENT_ROUND_TRIPS):
        round_trips.note(0.003)
    assert round_trips.far
