"""A provider's Retry-After is data: read as RFC 9110 says, capped where the retry is decided."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core.backoff import Backoff
from console.core.lifecycle import IntentFacts, RetryPolicy, decide_after_attempt
from console.core.outcomes import Classification
from console.transports.http_core import parse_retry_after
from console.vocabulary import PENDING, TRANSIENT

NOW_EPOCH = 1_800_000_000.0  # 2027-01-15
CAP_SECONDS = 3600
POLICY = RetryPolicy(Backoff(30, CAP_SECONDS, 5), max_attempts=5, max_age_seconds=10**9)
NOW = dt.datetime.fromtimestamp(NOW_EPOCH, dt.UTC)

RETRY_AFTER = [
    ("delay-seconds", "120", 120.0),
    ("delay-seconds with spaces", "  7 ", 7.0),
    ("zero", "0", 0.0),
    ("superscript two", "²", None),
    ("arabic-indic digits", "\u0663\u0660", None),
    ("fullwidth digits", "\uff11\uff12", None),
    ("a sign", "+5", None),
    ("negative", "-5", None),
    ("a fraction", "1.5", None),
    ("two headers joined", "5, 7", None),
    ("empty", "", None),
    ("absent", None, None),
    ("garbage", "soon", None),
    ("a date in the past", "Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
    ("a date 60 s ahead", "Fri, 15 Jan 2027 08:01:00 GMT", 60.0),
    ("an impossible date", "Mon, 99 Foo 99999 99:99:99 GMT", None),
    ("a date with a non-ASCII letter", "Fri, 15 Jän 2027 08:01:00 GMT", None),
    ("an endless date", "Fri, 15 Jan 2027 08:01:00 GMT" + " x" * 5000, None),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [case[1:] for case in RETRY_AFTER],
    ids=[case[0] for case in RETRY_AFTER],
)
def test_retry_after_is_read_as_rfc_9110_says(value, expected):
    now_epoch = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.UTC).timestamp()
    assert parse_retry_after(value, now_epoch) == expected


@pytest.mark.parametrize("digits", ["9" * 400, "99999999999", "9" * 20])
def test_a_huge_delay_is_finite(digits):
    seconds = parse_retry_after(digits, NOW_EPOCH)
    assert seconds is not None and seconds < float("inf")


@pytest.mark.parametrize(
    "retry_after_seconds", [99999999999.0, float("inf"), 1e308, 10.0**9, float("nan")]
)
def test_retry_after_never_waits_past_the_cap(retry_after_seconds):
    facts = IntentFacts(NOW - dt.timedelta(seconds=60), None, 1)
    transient = Classification(TRANSIENT, "429", retry_after_seconds=retry_after_seconds)
    decision = decide_after_attempt(transient, facts, NOW, POLICY, random=lambda: 0.5)
    assert decision.status == PENDING
    assert NOW < decision.next_attempt_at <= NOW + dt.timedelta(seconds=CAP_SECONDS)


def test_a_retry_after_under_the_cap_is_still_honoured():
    facts = IntentFacts(NOW - dt.timedelta(seconds=60), None, 1)
    transient = Classification(TRANSIENT, "429", retry_after_seconds=1800.0)
    decision = decide_after_attempt(transient, facts, NOW, POLICY, random=lambda: 0.5)
    assert decision.next_attempt_at == NOW + dt.timedelta(seconds=1800)
