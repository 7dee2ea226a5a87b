"""How far the database is, as the worker judges it from its data_sent marks: by the
fastest recent mark, so one slow mark (a statement prepared, a pause) does not make a
database next door look far for batches on end, and a far one never looks near."""

from __future__ import annotations

from sqlalchemy import create_engine

from console.store.threads import inline_for
from console.worker.crash_points import CrashPoint
from console.worker.stage_marks import RECENT_MARKS, StageMarks


def marks_timed(*seconds: float) -> StageMarks:
    stages = StageMarks(create_engine("sqlite://"), CrashPoint(None))
    for each in seconds:
        stages._note_mark_seconds(each)
    return stages


def test_before_any_mark_the_distance_is_unknown():
    assert marks_timed().mark_seconds is None
    assert not inline_for(None)


def test_one_slow_first_mark_does_not_make_a_near_database_look_far():
    assert inline_for(marks_timed(0.02, 0.0002, 0.0003).mark_seconds)


def test_a_far_database_stays_far_whatever_the_spread():
    assert not inline_for(marks_timed(0.003, 0.0025, 0.009, 0.004).mark_seconds)


def test_a_database_that_moved_away_is_seen_far_once_its_near_marks_are_old():
    stages = marks_timed(*[0.0002] * RECENT_MARKS)
    assert inline_for(stages.mark_seconds)
    for _ in range(RECENT_MARKS):
        stages._note_mark_seconds(0.003)
    assert not inline_for(stages.mark_seconds)
