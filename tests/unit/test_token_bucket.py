"""The send rate's token bucket and the daily quota (console.core.token_bucket), and the
throttling replies the classifier recognises. Pure: no database."""

from __future__ import annotations

import pytest

from console.core import token_bucket as tb
from console.core.blame import THROTTLING
from console.core.breaker import BreakerPolicy
from console.core.classify import classify
from console.core.send_result import SendResult
from console.vocabulary import BULK, CRITICAL, ENVELOPE, REPLY_READ, TRANSIENT

POLICY = tb.BucketPolicy.of(10.0)  # 10 a second, burst one second's worth


def test_the_burst_defaults_to_one_seconds_worth_and_never_below_one_message():
    assert tb.BucketPolicy.of(14.0).burst == 14.0
    assert tb.BucketPolicy.of(0.2).burst == 1.0
    assert tb.BucketPolicy.of(5.0, 20.0).burst == 20.0


def test_a_bucket_refills_at_the_rate_up_to_the_burst():
    empty = tb.Bucket(tokens=0.0, refilled_at=100.0)
    assert tb.refill(POLICY, empty, 100.5).tokens == pytest.approx(5.0)
    assert tb.refill(POLICY, empty, 160.0).tokens == POLICY.burst
    assert tb.refill(POLICY, empty, 99.0).tokens == 0.0, "a clock behind gains nothing"


def test_a_new_bucket_starts_empty_and_fills_at_the_rate():
    # nothing is known of what was sent just before (another version, a restart): the
    # provider's own bucket may be empty, and cold first sends would bunch up a burst
    bucket = tb.start(100.0)
    assert bucket == tb.Bucket(tokens=0.0, refilled_at=100.0)
    assert tb.take(POLICY, bucket, 100.0, 50)[1] == 0
    assert tb.take(POLICY, bucket, 100.35, 50)[1] == 3
    assert tb.take(POLICY, bucket, 102.0, 50)[1] == POLICY.burst


def test_a_claim_gets_at_most_the_tokens_there_are_and_bulk_leaves_one_for_critical():
    full = tb.Bucket(tokens=10.0, refilled_at=0.0)
    bucket, taken = tb.take(POLICY, full, 0.0, 50)
    assert taken == 10 and bucket.tokens == 0.0
    assert tb.bulk_allowance(POLICY, taken, bucket.tokens) == 9
    assert tb.bulk_allowance(POLICY, 3, 1.5) == 3
    assert tb.bulk_allowance(POLICY, 1, 0.2) == 0, "the last token waits for a login code"
    assert tb.bulk_allowance(tb.BucketPolicy.of(1.0), 1, 0.0) == 1, "no reserve in a burst of 1"


def test_tokens_not_used_go_back_up_to_the_burst():
    bucket = tb.give_back(POLICY, tb.Bucket(tokens=8.5, refilled_at=0.0), 5)
    assert bucket.tokens == POLICY.burst


def test_a_sustained_drain_never_beats_the_rate():
    bucket, sent, now = tb.Bucket(tokens=POLICY.burst, refilled_at=0.0), 0, 0.0
    while now < 60.0:
        bucket, taken = tb.take(POLICY, bucket, now, 1000)
        sent += taken
        now += 0.25
    assert sent <= POLICY.rate * 60 + POLICY.burst


def test_throttling_halves_the_rate_for_a_minute_then_it_recovers_step_by_step():
    bucket = tb.halve(tb.Bucket(tokens=10.0, refilled_at=0.0), 1000.0)
    assert bucket.tokens == 0.0
    assert tb.effective_rate(POLICY, bucket, 1000.0) == pytest.approx(5.0)
    assert tb.effective_rate(POLICY, bucket, 1059.9) == pytest.approx(5.0)
    assert tb.effective_rate(POLICY, bucket, 1060.0) == pytest.approx(6.0)
    assert tb.effective_rate(POLICY, bucket, 1085.0) == pytest.approx(8.0)
    assert tb.effective_rate(POLICY, bucket, 1100.0) == pytest.approx(10.0)
    assert tb.effective_rate(POLICY, bucket, 5000.0) == pytest.approx(10.0)


def test_replies_to_sends_already_in_flight_halve_once_a_later_throttle_again():
    once = tb.halve(tb.Bucket(tokens=10.0, refilled_at=0.0), 1000.0)
    assert tb.halve(once, 1000.5) == once
    twice = tb.halve(once, 1002.0)
    assert tb.effective_rate(POLICY, twice, 1002.0) == pytest.approx(2.5)
    floor = tb.Bucket(0.0, 0.0, factor=tb.MIN_FACTOR, slowed_at=0.0)
    assert tb.halve(floor, 2.0).factor == tb.MIN_FACTOR


def test_the_quota_keeps_its_critical_reserve():
    quota = tb.DailyQuota.of(50)
    assert quota.critical_reserve == 3, "5 % of 50, rounded up"
    assert quota.left(0) == (50, 47)
    assert quota.left(47) == (3, 0)
    assert quota.left(50) == (0, 0)
    assert tb.DailyQuota.of(50, 0).left(50) == (0, 0)


@pytest.mark.parametrize(
    "result",
    [
        SendResult(
            ENVELOPE,
            code=454,
            reply_text="4.7.0 Throttling failure: Maximum sending rate exceeded.",
        ),
        SendResult(ENVELOPE, code=454, reply_text="4.7.0 Temporary authentication failure"),
        SendResult(REPLY_READ, code=451, reply_text="4.3.2 Throttling: too many messages"),
        SendResult(REPLY_READ, code=421, reply_text="Maximum sending rate exceeded"),
        SendResult(
            REPLY_READ, code=429, protocol="http", reply_text='{"name":"rate_limit_exceeded"}'
        ),
    ],
)
def test_throttling_replies_are_transient_and_named(result):
    classification = classify(result)
    assert classification.outcome == TRANSIENT
    assert classification.blamed == THROTTLING
    assert not classification.blames_session


def test_other_temporary_failures_are_not_throttling():
    busy = classify(SendResult(ENVELOPE, code=450, reply_text="4.2.1 Mailbox busy"))
    assert busy.outcome == TRANSIENT and busy.blamed is None


def test_throttling_does_not_count_towards_the_breaker():
    from console.worker.guard import GuardPolicy, SendGuard

    guard = SendGuard(GuardPolicy(BreakerPolicy(window_attempts=4)), "w1")

    for _ in range(10):
        writes = guard.writes_after(
            lane=BULK,
            outcome=TRANSIENT,
            code=454,
            reached_transport=True,
            now=None,
            throttled=True,
        )
        assert writes == []
    assert len(guard.windows[BULK]) == 0 and len(guard.windows[CRITICAL]) == 0
