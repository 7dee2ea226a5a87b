"""The demo terminal's minute line: what the capture server answered, the traffic's progress."""

from __future__ import annotations

import collections
import datetime as dt
import time

import pytest

from console.demo.activity import Activity, activity_line
from console.demo.smtp_capture import GREYLISTED, HANGUP, REJECT, CapturedMessage

NOW = dt.datetime(2026, 12, 1, 19, 13, 40, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "answers, traffic, line",
    [
        ({}, None, None),
        ({"250": 1}, None, "19:13 UTC  last minute: 1 message to the capture server (1 accepted)"),
        (
            {"hangup": 1, "250": 4, "451": 2, "550": 1},
            (3, 8),
            "19:13 UTC  last minute: 8 messages to the capture server (4 accepted, "
            "2 answered 451, 1 refused (550), 1 hung up); demo traffic: 3 of 8 case notices queued",
        ),
        ({}, (8, 8), "19:13 UTC  last minute: demo traffic: 8 of 8 case notices queued"),
    ],
)
def test_the_minute_line(answers, traffic, line):
    assert activity_line(NOW, collections.Counter(answers), traffic) == line


def message(answer: str) -> CapturedMessage:
    return CapturedMessage("ada@example.com", "<1@demo>", "Your order", answer)


def test_each_line_counts_the_minute_since_the_last_and_a_quiet_minute_says_nothing():
    activity = Activity(echo=print)
    for answer in ("250 2.0.0 Ok: queued as DEMO1", GREYLISTED, REJECT, HANGUP):
        activity.captured(message(answer))
    activity.traffic(1, 8)
    first = activity.take_line(NOW)
    assert first == (
        "19:13 UTC  last minute: 4 messages to the capture server (1 accepted, 1 answered 451, "
        "1 refused (550), 1 hung up); demo traffic: 1 of 8 case notices queued"
    )
    assert activity.take_line(NOW + dt.timedelta(minutes=1)) is None
    activity.captured(message("250 2.0.0 Ok: queued as DEMO2"))
    assert activity.take_line(NOW).endswith("(1 accepted)")


def test_the_thread_prints_a_line_per_interval_with_activity_only():
    printed = []
    activity = Activity(echo=printed.append, interval_seconds=0.05).start()
    try:
        activity.captured(message("250 2.0.0 Ok"))
        deadline = time.monotonic() + 5
        while not printed and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # several quiet intervals go by
    finally:
        activity.stop()
    assert len(printed) == 1 and printed[0].endswith("(1 accepted)")
