"""Attempts an operator granted with a requeue ("give it N more attempts"), decided from facts.

The worker gives up for the attempt cap only when the attempts made reach the
larger of the configured cap and the count granted; while granted attempts
remain, the age cap does not make the intent dead either. The application's
expiry and the template's max age still expire it.
"""

from __future__ import annotations

import datetime as dt

import pytest

from console import vocabulary
from console.core.backoff import Backoff
from console.core.lifecycle import IntentFacts, RetryPolicy, decide_after_attempt
from console.core.outcomes import Classification
from console.vocabulary import TRANSIENT

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
DAY = 86400
POLICY = RetryPolicy(Backoff(30, 3600, 5), max_attempts=5, max_age_seconds=DAY)
HALF = lambda: 0.5  # noqa: E731 - a fixed draw makes the backoff exact
FAILED_FOR_NOW = Classification(TRANSIENT, "451 try later")

PENDING, DEAD, EXPIRED = vocabulary.PENDING, vocabulary.DEAD, vocabulary.EXPIRED

# name, attempts made (including the one decided), attempts granted, age in s, expires in s, status
CASES = [
    ("at the cap, nothing granted", 5, None, 60, None, DEAD),
    ("at the cap, 3 more granted", 5, 8, 60, None, PENDING),
    ("one granted attempt left", 7, 8, 60, None, PENDING),
    ("granted attempts used up", 8, 8, 60, None, DEAD),
    ("past the grant", 9, 8, 60, None, DEAD),
    ("a grant below the cap does not lower it", 3, 2, 60, None, PENDING),
    ("a grant below the cap, at the cap", 5, 2, 60, None, DEAD),
    ("past the age cap, nothing granted", 2, None, DAY, None, DEAD),
    ("past the age cap, granted attempts left", 5, 8, DAY, None, PENDING),
    ("past the age cap, granted attempts used up", 8, 8, DAY, None, DEAD),
    ("past the age cap, grant below the attempt cap, left", 3, 4, DAY, None, PENDING),
    ("past the age cap, grant below the attempt cap, used", 4, 4, DAY, None, DEAD),
    ("a grant does not outlive the application's expiry", 5, 8, 60, 10, EXPIRED),
]


@pytest.mark.parametrize(
    ("attempts", "granted", "age", "expires_in", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_transient_failure_with_attempts_granted(attempts, granted, age, expires_in, expected):
    expires_at = NOW + dt.timedelta(seconds=expires_in) if expires_in is not None else None
    facts = IntentFacts(
        NOW - dt.timedelta(seconds=age), expires_at, attempts, attempts_granted=granted
    )

    decision = decide_after_attempt(FAILED_FOR_NOW, facts, NOW, POLICY, HALF)

    assert decision.status == expected
    if expected == PENDING:
        assert decision.next_attempt_at > NOW
    if expected == DEAD:
        assert decision.alert


def test_the_reason_of_a_dead_intent_counts_the_granted_attempts():
    facts = IntentFacts(NOW - dt.timedelta(seconds=60), None, 8, attempts_granted=8)

    decision = decide_after_attempt(FAILED_FOR_NOW, facts, NOW, POLICY, HALF)

    assert decision.reason == "gave up after 8 attempts; last: 451 try later"
