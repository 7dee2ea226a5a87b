"""Lifecycle decisions: at claim, after an attempt, after a silent lease."""

from __future__ import annotations

import datetime as dt

import pytest

from console import vocabulary
from console.core.backoff import Backoff
from console.core.lifecycle import (
    IntentFacts,
    RetryPolicy,
    TemplateRules,
    classify_lease_expiry,
    decide_after_attempt,
    decide_at_claim,
)
from console.core.outcomes import Classification
from console.core.send_result import handed_over
from console.vocabulary import ACCEPTED, AMBIGUOUS, PERMANENT, STAGES, TRANSIENT

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
POLICY = RetryPolicy(Backoff(30, 3600, 5), max_attempts=5, max_age_seconds=86400)
HALF = lambda: 0.5  # noqa: E731 - a fixed draw makes the backoff exact
HOLD = TemplateRules()
RESEND = TemplateRules(ambiguity_policy="resend", max_age_seconds=600)


def facts(attempts=1, age_seconds=60, expires_in=None, rules=HOLD):
    expires_at = NOW + dt.timedelta(seconds=expires_in) if expires_in is not None else None
    return IntentFacts(NOW - dt.timedelta(seconds=age_seconds), expires_at, attempts, rules)


def outcome(name, **extra):
    return Classification(name, f"{name} reason", **extra)


AFTER_ATTEMPT = [
    ("accepted", outcome(ACCEPTED), facts(), vocabulary.SUBMITTED, None),
    ("permanent", outcome(PERMANENT), facts(), vocabulary.FAILED, None),
    ("transient, 1st attempt", outcome(TRANSIENT), facts(attempts=1), vocabulary.PENDING, 15),
    ("transient, 3rd attempt", outcome(TRANSIENT), facts(attempts=3), vocabulary.PENDING, 60),
    ("transient, attempt cap", outcome(TRANSIENT), facts(attempts=5), vocabulary.DEAD, None),
    ("transient, age cap", outcome(TRANSIENT), facts(age_seconds=86400), vocabulary.DEAD, None),
    ("ambiguous, hold", outcome(AMBIGUOUS), facts(), vocabulary.AMBIGUOUS, None),
    ("ambiguous, resend", outcome(AMBIGUOUS), facts(rules=RESEND), vocabulary.PENDING, 15),
    ("ambiguous, resend, cap", outcome(AMBIGUOUS), facts(5, rules=RESEND), vocabulary.DEAD, None),
    ("transient past expiry", outcome(TRANSIENT), facts(expires_in=10), vocabulary.EXPIRED, None),
    (
        "transient past template max age",
        outcome(TRANSIENT),
        facts(age_seconds=590, rules=RESEND),
        vocabulary.EXPIRED,
        None,
    ),
    (
        "Retry-After beats a shorter backoff",
        outcome(TRANSIENT, retry_after_seconds=300),
        facts(),
        vocabulary.PENDING,
        300,
    ),
]


@pytest.mark.parametrize(
    "label,classification,intent,status,retry_in", AFTER_ATTEMPT, ids=[r[0] for r in AFTER_ATTEMPT]
)
def test_after_an_attempt(label, classification, intent, status, retry_in):
    decision = decide_after_attempt(classification, intent, NOW, POLICY, random=HALF)
    assert decision.status == status
    assert classification.reason in decision.reason
    if retry_in is None:
        assert decision.next_attempt_at is None
    else:
        assert decision.next_attempt_at == NOW + dt.timedelta(seconds=retry_in)


def test_dead_letters_are_alerts_and_say_why():
    decision = decide_after_attempt(outcome(TRANSIENT), facts(attempts=5), NOW, POLICY, HALF)
    assert decision.alert and "5 attempts" in decision.reason
    aged = decide_after_attempt(outcome(TRANSIENT), facts(age_seconds=90000), NOW, POLICY, HALF)
    assert aged.alert and "90000 s" in aged.reason


def test_an_unknown_outcome_is_a_programming_error():
    with pytest.raises(ValueError):
        decide_after_attempt(outcome("maybe"), facts(), NOW, POLICY, HALF)


AT_CLAIM = [
    ("fresh", facts(), False, None, None),
    ("expires_at passed", facts(expires_in=0), False, None, vocabulary.EXPIRED),
    (
        "template max age passed",
        facts(age_seconds=600, rules=RESEND),
        False,
        None,
        vocabulary.EXPIRED,
    ),
    ("suppressed", facts(), True, None, vocabulary.SUPPRESSED),
    ("ineligible", facts(), False, "already verified", vocabulary.CANCELLED),
    ("expiry wins over suppression", facts(expires_in=-1), True, "x", vocabulary.EXPIRED),
]


@pytest.mark.parametrize(
    "label,intent,suppressed,ineligible,status", AT_CLAIM, ids=[r[0] for r in AT_CLAIM]
)
def test_at_claim(label, intent, suppressed, ineligible, status):
    decision = decide_at_claim(intent, NOW, suppressed=suppressed, ineligible_reason=ineligible)
    if status is None:
        assert decision is None
    else:
        assert decision.status == status and decision.reason
    if status == vocabulary.CANCELLED:
        assert "already verified" in decision.reason


@pytest.mark.parametrize("stage", STAGES)
def test_a_silent_lease_is_ambiguous_once_the_body_may_have_left(stage):
    classification = classify_lease_expiry(stage, handed_over(stage))
    expected = AMBIGUOUS if stage in ("data_sent", "reply_read") else TRANSIENT
    assert classification.outcome == expected
    assert stage in classification.reason


def test_a_silent_lease_before_handover_goes_back_to_pending_and_counts():
    classification = classify_lease_expiry("claimed", False)
    decision = decide_after_attempt(classification, facts(attempts=2), NOW, POLICY, HALF)
    assert decision.status == vocabulary.PENDING
    capped = decide_after_attempt(classification, facts(attempts=5), NOW, POLICY, HALF)
    assert capped.status == vocabulary.DEAD
