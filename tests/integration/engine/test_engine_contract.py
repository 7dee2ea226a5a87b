"""The promises every engine keeps, asked through the ``Engine`` interface alone, on
SQLite and on PostgreSQL: one claim never leases an intent twice, held and deferred mail
stays put, retries go first, the mark comes before the body and is refused for a
suppressed recipient or a swept attempt, a record is a compare-and-set on the lease, and
a lease whose worker went silent after the mark is taken back as ambiguous; and the
statements each database spells its own way: the send budget's take,
refund and halving, a domain's deferral kept at its later end, a breaker's first row.

The worker's own tests exercise the same promises through a real SMTP relay; here each
is one step of the engine, so a broken engine names the step it broke.
"""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import insert, update

from console.core import breaker
from console.core import token_bucket as tb
from console.core.breaker import BreakerPolicy, BreakerState
from console.core.domain_backoff import Deferral
from console.core.lifecycle import Decision, classify_lease_expiry
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.engine import SUPPRESSED, SWEPT
from console.models import Intent, Suppression
from console.store import holds, records, send_budget, send_guards
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CLAIMED,
    DATA_SENT,
    PENDING,
    REPLY_READ,
    SENDING,
    SUBMITTED,
)
from tests.support.claim_steps import (
    T0,
    claim_all,
    in_claim,
    load,
    on_engine,
    queue,
    seconds,
    sweep,
)


def judge_as_the_core_does(lease, now):
    """A lease taken back after the mark is ambiguous; before it, due again now."""
    verdict = classify_lease_expiry(lease.stage, handed_over=lease.stage == DATA_SENT)
    becomes = AMBIGUOUS if lease.stage == DATA_SENT else PENDING
    return verdict, Decision(becomes, verdict.reason, now if becomes == PENDING else None)


def submitted(claim, now):
    result = SendResult(REPLY_READ, code=250, reply_text="2.0.0 Ok: queued as Q9")
    decision = Decision(SUBMITTED)
    return records.record_values(claim, result, Classification(ACCEPTED, "accepted"), decision, now)


def test_a_claimed_intent_is_leased_once_and_a_second_claim_finds_nothing(session_factory, session):
    first, second = queue(session_factory), queue(session_factory)
    leased = claim_all(session)
    assert sorted(c.intent.id for c in leased) == [first, second]
    assert len({c.lease_token for c in leased}) == 2
    assert claim_all(session) == []
    for claim in leased:
        intent, [attempt] = load(session_factory, claim.intent.id)
        assert (intent.status, intent.lease_token) == (SENDING, claim.lease_token)
        assert (attempt.stage, attempt.lease_token) == (CLAIMED, claim.lease_token)


def test_retries_go_before_first_attempts_whatever_became_due_first(session_factory, session):
    first_try = queue(session_factory, due=T0 - seconds(300))
    retry = queue(session_factory, due=T0 - seconds(10), attempt_count=1)
    assert [c.intent.id for c in claim_all(session)] == [retry, first_try]


def test_held_and_deferred_mail_stays_pending(session_factory, session):
    held = queue(session_factory, recipient="ada@held.example")
    deferred = queue(session_factory, recipient="bob@slow.example")
    free = queue(session_factory)
    with session_factory() as other:
        selector = holds.Selector.parse("domain", "held.example")
        holds.place_hold(other, selector, actor="ops", reason="drill", now=T0 - seconds(5))
        other.commit()
    deferral = Deferral("slow.example", T0 + seconds(60), 0)
    on_engine(session.get_bind(), lambda e: e.defer_domain(deferral, 421, T0 - seconds(5)))
    assert [c.intent.id for c in claim_all(session)] == [free]
    for intent_id in (held, deferred):
        assert load(session_factory, intent_id)[0].status == PENDING


def test_the_mark_commits_before_the_body_and_the_record_moves_the_intent(
    engine, session_factory, session
):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    assert on_engine(engine, lambda e: e.mark(claim.attempt_id, claim.intent.recipient)) is None
    assert load(session_factory, intent_id)[1][0].stage == DATA_SENT  # seen by another session
    assert on_engine(engine, lambda e: e.record(submitted(claim, T0 + seconds(1))))
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, intent.lease_token, attempt.stage) == (SUBMITTED, None, REPLY_READ)


def test_a_suppressed_recipient_or_a_swept_attempt_refuses_the_mark(
    engine, session_factory, session
):
    suppressed_id, swept_id = queue(session_factory), queue(session_factory)
    leased = {c.intent.id: c for c in claim_all(session)}
    with session_factory() as other:
        recipient = leased[suppressed_id].intent.recipient
        other.execute(
            insert(Suppression).values(recipient=recipient.lower(), reason="bounce", created_at=T0)
        )
        other.commit()
    with session_factory() as other:  # the other one's lease alone runs out
        table = Intent.__table__
        other.execute(
            update(table)
            .where(table.c.id == suppressed_id)
            .values(lease_expires_at=T0 + seconds(7200))
        )
        other.commit()
    [(expired, _)] = sweep(engine, T0 + seconds(3600), judge_as_the_core_does)

    async def marks(e):
        refused = []
        for intent_id in (suppressed_id, swept_id):
            claim = leased[intent_id]
            refused.append(await e.mark(claim.attempt_id, claim.intent.recipient))
        return refused

    assert on_engine(engine, marks) == [SUPPRESSED, SWEPT]
    assert expired.stage == CLAIMED
    for intent_id in (suppressed_id, swept_id):
        assert load(session_factory, intent_id)[1][0].stage == CLAIMED


def test_a_record_under_a_lost_lease_changes_nothing(engine, session_factory, session):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    stale = dataclasses.replace(claim, lease_token="a-lease-taken-back")
    assert on_engine(engine, lambda e: e.record(submitted(stale, T0 + seconds(1)))) is False
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, attempt.finished_at) == (SENDING, None)


@pytest.mark.parametrize(("marked", "becomes"), [(True, AMBIGUOUS), (False, PENDING)])
def test_a_silent_workers_lease_is_taken_back_as_its_stage_says(
    marked, becomes, engine, session_factory, session
):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    if marked:
        on_engine(engine, lambda e: e.mark(claim.attempt_id, claim.intent.recipient))
    swept_at = T0 + seconds(3600)
    [(lease, decision)] = sweep(engine, swept_at, judge_as_the_core_does)
    assert (lease.intent.id, lease.stage) == (intent_id, DATA_SENT if marked else CLAIMED)
    verdict = classify_lease_expiry(lease.stage, handed_over=marked)
    assert decision.status == becomes
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, attempt.outcome) == (becomes, verdict.outcome)
    assert on_engine(engine, lambda e: e.record(submitted(claim, swept_at))) is False


def test_the_send_budget_takes_refunds_up_to_its_burst_and_halves_as_the_core_computes(session):
    policy = tb.BucketPolicy.of(10.0, burst=20.0)
    bucket = tb.start(1000.0)

    def take_tokens(now, want):
        return in_claim(session, lambda steps: steps.take_tokens(policy, now, want))

    def stored_bucket():
        session.rollback()  # a fresh read
        return send_budget.read_bucket(session)

    assert take_tokens(1000.0, 5) == (0, 0.0)  # made empty

    def take(now, want):
        nonlocal bucket
        bucket, taken = tb.take(policy, bucket, now, want)
        assert take_tokens(now, want) == (taken, pytest.approx(bucket.tokens)), now

    take(1001.55, 12)  # 15.5 tokens: 12 taken
    for refund in (10, 10):  # the second refund fills the bucket to its burst, no further
        in_claim(session, lambda steps: steps.settle_budget(policy, refund, 1001.6, 0))  # noqa: B023
        bucket = tb.give_back(policy, bucket, refund)
        assert stored_bucket().tokens == pytest.approx(bucket.tokens)
    assert on_engine(session.get_bind(), lambda e: e.halve_rate(1002.0))
    assert not on_engine(session.get_bind(), lambda e: e.halve_rate(1002.5)), "once a second"
    bucket = tb.halve(bucket, 1002.0)
    assert stored_bucket() == bucket
    for now in (1002.7, 1054.0, 1055.0, 1063.0, 1079.9, 1200.0):  # half, then climbing back
        take(now, 100)


def test_the_quota_counts_what_claims_leased_by_the_hour(session):
    hour = send_budget.HOUR
    start = 100 * hour

    def count(now, leased):
        in_claim(session, lambda steps: steps.settle_budget(None, 5, now, leased))

    def sent_since(since):
        return in_claim(session, lambda steps: steps.sent_since(since))

    count(start + 10, 3)
    count(start + 20, 4)  # the same hour
    count(start + hour + 1, 2)  # the next one
    assert sent_since(start + 30) == 9, "from the hour holding `since` on"
    assert sent_since(start + hour) == 2
    count(start + 60 * hour, 1)  # two days on: the hours older than 48 forgotten
    assert sent_since(0) == 1


def test_a_domain_deferral_keeps_its_later_end_and_moves_the_domains_due_mail(
    engine, session_factory, session
):
    at_the_domain = queue(session_factory, recipient="ada@slow.example")
    elsewhere = queue(session_factory, recipient="bob@slow.example.org")
    for until, code in ((600, 421), (60, 451), (1200, 421)):
        deferral = Deferral("slow.example", T0 + seconds(until), 0)
        on_engine(engine, lambda e: e.defer_domain(deferral, code, T0))  # noqa: B023
        session.expire_all()
        [stored] = send_guards.active_deferrals(session, T0)
        assert (stored.deferred_until, stored.reply_code) == (T0 + seconds(max(600, until)), code)
    assert load(session_factory, at_the_domain)[0].next_attempt_at == T0 + seconds(1200)
    assert load(session_factory, elsewhere)[0].next_attempt_at == T0 - seconds(60)


def test_a_breaker_moves_only_from_the_state_its_worker_saw(engine):
    opened = breaker.trip_now(BreakerState(), BreakerPolicy(), T0)

    def move(seen, new, owner=None):
        return on_engine(engine, lambda e: e.move_breaker("bulk", seen, new, T0, owner))

    assert move(BreakerState(), opened), "the lane's first row"
    assert not move(BreakerState(), opened), "another worker wrote it first"
    probing = breaker.start_probe(opened, BreakerPolicy(), opened.resume_at)
    assert move(opened, probing, owner="w2")
    assert not move(opened, probing, owner="w3"), "the probe is taken"
    breakers = on_engine(engine, lambda e: e.read_breakers())
    assert breakers == {"critical": BreakerState(), "bulk": probing}
