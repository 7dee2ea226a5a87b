"""The send loop's queries called directly, without the worker: claims (T1), the compare-and-set
record (T2), the lease sweep, the give-back and the heartbeat, on SQLite and PostgreSQL;
SKIP LOCKED on PostgreSQL only.
"""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import insert, update

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.models import Attempt, Suppression
from console.state_tables import WorkerHeartbeat
from console.store import claims, heartbeats, records
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    BULK,
    CLAIMED,
    CRITICAL,
    DATA_SENT,
    EXPIRED,
    PENDING,
    REPLY_READ,
    SENDING,
    STATUSES,
    SUBMITTED,
    TRANSIENT,
)
from tests.support.claim_steps import (
    LEASE_SECONDS,
    T0,
    WORKER_ID,
    claim_all,
    give_back,
    in_claim,
    lease_all,
    load,
    lock,
    on_engine,
    queue,
    seconds,
    sweep,
)


def ids(due) -> list[int]:
    return [intent.id for intent in due]


# --- lock_due ---


def test_lock_due_takes_due_pending_intents_only(session_factory, session):
    overdue = queue(session_factory, due=T0 - seconds(60))
    due_now = queue(session_factory, due=T0)
    queue(session_factory, due=T0 + seconds(1))  # not yet
    for status in STATUSES:
        if status != PENDING:
            queue(session_factory, due=T0 - seconds(120), status=status)

    assert ids(lock(session)) == [overdue, due_now]


def test_lock_due_takes_the_critical_lane_first_each_lane_oldest_first(session_factory, session):
    bulk_oldest = queue(session_factory, lane=BULK, due=T0 - seconds(300))
    critical_newer = queue(session_factory, lane=CRITICAL, due=T0 - seconds(10))
    bulk_newer = queue(session_factory, lane=BULK, due=T0 - seconds(20))
    critical_older = queue(session_factory, lane=CRITICAL, due=T0 - seconds(100))

    due = lock(session)

    assert ids(due) == [critical_older, critical_newer, bulk_oldest, bulk_newer]
    assert [intent.lane for intent in due] == [CRITICAL, CRITICAL, BULK, BULK]


# (batch limit, lane limits from the guard) -> which of c1..c3, b1..b3 are locked, in order
LIMIT_CASES = {
    "the batch limit cuts into bulk": (4, None, ["c1", "c2", "c3", "b1"]),
    "the batch limit cuts into critical": (2, None, ["c1", "c2"]),
    "a paused critical lane": (10, {CRITICAL: 0}, ["b1", "b2", "b3"]),
    "a probing bulk lane": (10, {BULK: 1}, ["c1", "c2", "c3", "b1"]),
    "one critical probe, bulk paused": (10, {CRITICAL: 1, BULK: 0}, ["c1"]),
    "both lanes paused": (10, {CRITICAL: 0, BULK: 0}, []),
}


@pytest.mark.parametrize("case", list(LIMIT_CASES))
def test_lock_due_respects_the_batch_and_each_lanes_limit(case, session_factory, session):
    limit, lane_limits, expected = LIMIT_CASES[case]
    names = {}
    for n in (3, 2, 1):  # inserted newest first: id order is not due order
        names[f"b{n}"] = queue(session_factory, lane=BULK, due=T0 - seconds(100 - n))
        names[f"c{n}"] = queue(session_factory, lane=CRITICAL, due=T0 - seconds(10 - n))

    assert ids(lock(session, limit, lane_limits)) == [names[name] for name in expected]


def test_lane_limits_within_caps_each_lane_at_the_batch_limit():
    assert claims.lane_limits_within(5, None) == {CRITICAL: 5, BULK: 5}
    assert claims.lane_limits_within(5, {CRITICAL: 0}) == {CRITICAL: 0, BULK: 5}
    assert claims.lane_limits_within(5, {BULK: 9, CRITICAL: 1}) == {CRITICAL: 1, BULK: 5}


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # SQLite has one writer
def test_concurrent_claims_lock_disjoint_batches_without_waiting(session_factory):
    queued = [queue(session_factory, due=T0 - seconds(60 - n)) for n in range(5)]
    limits = claims.lane_limits_within(10, None)

    async def two_claims_at_once(engine):
        async with engine.claiming() as first:
            first_batch = await first.lock_due(T0, 3, limits)
            # waiting for `first`'s row locks would hang until the statement deadline
            async with engine.claiming() as second:
                second_batch = await second.lock_due(T0, 10, limits)
        return first_batch, second_batch

    first_batch, second_batch = on_engine(session_factory.kw["bind"], two_claims_at_once)

    assert ids(first_batch) == queued[:3]
    assert ids(second_batch) == queued[3:], "SKIP LOCKED: the rows the first one holds"


# --- suppressed_among ---


def test_suppressed_among_returns_the_suppressed_recipients_only(session):
    rows = [
        dict(recipient=recipient, reason="complaint", created_at=T0)
        for recipient in ("eve@example.com", "zed@example.com")
    ]
    session.execute(insert(Suppression.__table__), rows)
    session.commit()

    asked = {"eve@example.com", "ada@example.com"}
    assert in_claim(session, lambda steps: steps.suppressed_among(asked)) == {"eve@example.com"}
    assert in_claim(session, lambda steps: steps.suppressed_among(set())) == set()


@pytest.mark.postgres

# --- close_unsent and lease ---


def test_close_unsent_moves_intents_as_decided_without_an_attempt(session_factory, session):
    too_old = queue(session_factory, due=T0 - seconds(60))
    deferred = queue(session_factory, due=T0 - seconds(30))
    later = T0 + seconds(300)

    async def close_both(steps):
        expired_due, deferred_due = await steps.lock_due(
            T0, 50, claims.lane_limits_within(50, None)
        )
        decisions = [
            (expired_due, Decision(EXPIRED, "older than its max age")),
            (deferred_due, Decision(PENDING, "domain backing off", next_attempt_at=later)),
        ]
        await steps.close_unsent(decisions, T0 + seconds(1))

    in_claim(session, close_both)

    expired, expired_attempts = load(session_factory, too_old)
    assert (expired.status, expired.status_reason) == (EXPIRED, "older than its max age")
    assert expired.next_attempt_at == T0 - seconds(60), "no new time given: unchanged"
    assert expired.updated_at == T0 + seconds(1)
    pending, pending_attempts = load(session_factory, deferred)
    assert (pending.status, pending.next_attempt_at) == (PENDING, later)
    for intent in (expired, pending):
        assert intent.attempt_count == 0 and intent.lease_token is None
    assert expired_attempts == [] and pending_attempts == []


def test_lease_gives_each_intent_a_fresh_token_and_one_claimed_attempt(session_factory, session):
    first = queue(session_factory, due=T0 - seconds(60))
    retried = queue(session_factory, due=T0 - seconds(30), attempt_count=2)

    leased = claim_all(session)

    assert [c.intent.id for c in leased] == [retried, first]  # retries go first
    assert [c.attempt_number for c in leased] == [3, 1]
    tokens = [c.lease_token for c in leased]
    assert len(set(tokens)) == 2 and all(len(token) >= 16 for token in tokens)
    lease_expires_at = T0 + seconds(LEASE_SECONDS)
    for claim in leased:
        intent, attempts = load(session_factory, claim.intent.id)
        assert intent.status == SENDING and intent.attempt_count == claim.attempt_number
        assert (intent.lease_token, intent.lease_expires_at) == (
            claim.lease_token,
            lease_expires_at,
        )
        assert claim.lease_expires_at == lease_expires_at
        [attempt] = attempts
        assert attempt.id == claim.attempt_id and attempt.attempt_number == claim.attempt_number
        assert (attempt.lease_token, attempt.worker_id) == (claim.lease_token, WORKER_ID)
        assert (attempt.stage, attempt.started_at) == (CLAIMED, T0)
        assert attempt.finished_at is None and attempt.outcome is None
    nothing = in_claim(session, lambda steps: steps.lease([], T0, lease_expires_at, WORKER_ID))
    assert nothing == []


class ClaimFailed(Exception):
    pass


def test_a_claim_that_fails_commits_nothing(session_factory, session):
    closed = queue(session_factory, due=T0 - seconds(60))
    leased = queue(session_factory, due=T0 - seconds(30))

    async def fail_after_leasing(steps):
        closed_due, leased_due = await steps.lock_due(T0, 50, claims.lane_limits_within(50, None))
        await steps.close_unsent([(closed_due, Decision(EXPIRED, "too old"))], T0)
        await steps.lease([leased_due], T0, T0 + seconds(LEASE_SECONDS), WORKER_ID)
        raise ClaimFailed  # the worker's T1 failed before its commit

    with pytest.raises(ClaimFailed):
        in_claim(session, fail_after_leasing)

    for intent_id in (closed, leased):
        intent, attempts = load(session_factory, intent_id)
        assert (intent.status, intent.status_reason, intent.lease_token) == (PENDING, None, None)
        assert intent.attempt_count == 0 and attempts == []
    assert ids(lock(session)) == [closed, leased], "due again"


# --- release ---


def test_the_give_back_returns_only_what_this_lease_holds(engine, session_factory, session):
    given_back = queue(session_factory, due=T0 - seconds(60), attempt_count=2)
    taken = queue(session_factory, due=T0 - seconds(30))
    mine, theirs = claim_all(session)
    not_mine = dataclasses.replace(theirs, lease_token="a-lease-this-worker-lost")

    released = give_back(engine, [(mine, T0 + seconds(5)), (not_mine, T0)], T0 + seconds(1))

    assert released == 1
    intent, attempts = load(session_factory, given_back)
    assert (intent.status, intent.attempt_count) == (PENDING, 2), "the count restored"
    assert (intent.lease_token, intent.lease_expires_at) == (None, None)
    assert intent.next_attempt_at == T0 + seconds(5) and attempts == []
    assert intent.updated_at == T0 + seconds(1)
    intent, attempts = load(session_factory, taken)
    assert (intent.status, intent.lease_token, intent.attempt_count) == (
        SENDING,
        theirs.lease_token,
        1,
    )
    assert [a.id for a in attempts] == [theirs.attempt_id]


# --- the record: T2, compare-and-set on the lease token ---


def test_the_record_moves_the_intent_only_for_the_current_lease(engine, session_factory, session):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    stale = dataclasses.replace(claim, lease_token="a-lease-swept-meanwhile")
    result = SendResult(
        REPLY_READ, code=250, reply_text="2.0.0 Ok: queued as Q1", provider_message_id="Q1"
    )
    accepted = Classification(ACCEPTED, "accepted")
    recorded_at = T0 + seconds(2)

    def record(claim_held: claims.Claim) -> bool:
        values = records.record_values(
            claim_held, result, accepted, Decision(SUBMITTED), recorded_at
        )
        return on_engine(engine, lambda on: on.record(values))

    assert record(stale) is False
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, intent.lease_token) == (SENDING, claim.lease_token)
    assert intent.submitted_at is None and intent.provider_message_id is None
    assert (attempt.stage, attempt.finished_at, attempt.outcome) == (CLAIMED, None, None)

    assert record(claim) is True
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, intent.submitted_at) == (SUBMITTED, recorded_at)
    assert (intent.lease_token, intent.lease_expires_at) == (None, None)
    assert intent.provider_message_id == "Q1" == attempt.provider_message_id
    assert (attempt.stage, attempt.outcome, attempt.reply_code) == (REPLY_READ, ACCEPTED, 250)
    assert (attempt.finished_at, attempt.enhanced_status) == (recorded_at, "2.0.0")

    assert record(claim) is False, "recorded once: the lease is gone"


# --- the lease sweep ---


def test_the_sweep_takes_expired_leases_only_and_settles_each_as_judged(
    engine, session_factory, session
):
    body_sent = queue(session_factory, due=T0 - seconds(60))
    claimed_only = queue(session_factory, due=T0 - seconds(50))
    still_leased = queue(session_factory, due=T0 - seconds(40))
    queue(session_factory, status=SUBMITTED, lease_expires_at=T0)  # not sending: never taken
    due = lock(session)
    expiring = lease_all(session, due[:2], lease_seconds=60)
    [live] = lease_all(session, due[2:], lease_seconds=600)
    recipient = expiring[0].intent.recipient
    assert on_engine(engine, lambda on: on.mark(expiring[0].attempt_id, recipient)) is None
    swept_at = T0 + seconds(61)
    retry_at = swept_at + seconds(30)
    judged = []

    def judge(lease, now):
        judged.append((lease.intent.id, lease.lease_token, lease.attempt_id, lease.stage, now))
        if lease.stage == DATA_SENT:
            verdict = Classification(AMBIGUOUS, "lease expired after the body was handed over")
            return verdict, Decision(AMBIGUOUS, "lease expired")
        verdict = Classification(TRANSIENT, "lease expired before the body was sent")
        return verdict, Decision(PENDING, "lease expired", next_attempt_at=retry_at)

    settled = sweep(engine, swept_at, judge)

    assert sorted(judged) == [
        (body_sent, expiring[0].lease_token, expiring[0].attempt_id, DATA_SENT, swept_at),
        (claimed_only, expiring[1].lease_token, expiring[1].attempt_id, CLAIMED, swept_at),
    ]
    assert sorted((lease.intent.id, decision.status) for lease, decision in settled) == [
        (body_sent, AMBIGUOUS),
        (claimed_only, PENDING),
    ]
    intent, [attempt] = load(session_factory, body_sent)
    assert (intent.status, intent.lease_token, intent.lease_expires_at) == (AMBIGUOUS, None, None)
    assert (intent.status_reason, intent.updated_at) == ("lease expired", swept_at)
    assert (attempt.stage, attempt.outcome, attempt.finished_at) == (DATA_SENT, AMBIGUOUS, swept_at)
    assert attempt.error == "lease expired after the body was handed over"
    intent, [attempt] = load(session_factory, claimed_only)
    assert (intent.status, intent.next_attempt_at, intent.attempt_count) == (PENDING, retry_at, 1)
    assert (attempt.stage, attempt.outcome, attempt.finished_at) == (CLAIMED, TRANSIENT, swept_at)
    intent, [attempt] = load(session_factory, still_leased)
    assert (intent.status, intent.lease_token) == (SENDING, live.lease_token)
    assert attempt.finished_at is None and attempt.outcome is None
    assert sweep(engine, swept_at, judge) == [], "nothing left to take back"


def test_a_lease_whose_attempt_is_finished_already_is_not_settled(engine, session_factory, session):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    with session_factory() as other:  # its record finished the attempt, not yet the intent
        table = Attempt.__table__
        other.execute(update(table).where(table.c.id == claim.attempt_id).values(finished_at=T0))
        other.commit()

    settled = sweep(engine, T0 + seconds(61), lambda lease, now: pytest.fail("judged"))

    assert settled == []
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, intent.lease_token) == (SENDING, claim.lease_token)
    assert (attempt.finished_at, attempt.outcome) == (T0, None)


def test_a_sweep_that_fails_commits_nothing(engine, session_factory, session):
    first, second = queue(session_factory), queue(session_factory)
    claimed = claim_all(session)

    judged = []

    def judge(lease, now):  # the first lease is settled, then the second one fails
        judged.append(lease.intent.id)
        if len(judged) == 2:
            raise RuntimeError("the judgement failed")
        verdict = Classification(TRANSIENT, "lease expired before the body was sent")
        return verdict, Decision(PENDING, "lease expired", next_attempt_at=now)

    with pytest.raises(RuntimeError, match="the judgement failed"):
        sweep(engine, T0 + seconds(61), judge)

    assert sorted(judged) == [first, second]
    for intent_id, claim in zip((first, second), claimed, strict=True):
        intent, [attempt] = load(session_factory, intent_id)
        assert (intent.status, intent.lease_token) == (SENDING, claim.lease_token)
        assert attempt.finished_at is None and attempt.outcome is None


def test_the_beat_inserts_a_workers_row_then_refreshes_it_and_clears_its_stop(engine, session):
    def beat(now):
        values = heartbeats.beat_values(WORKER_ID, host="mail-1", pid=42, started_at=T0, now=now)
        on_engine(engine, lambda each: each.beat(values))

    beat(T0)
    session.execute(
        update(WorkerHeartbeat).where(WorkerHeartbeat.worker_id == WORKER_ID).values(stopped_at=T0)
    )
    session.commit()
    beat(T0 + seconds(5))

    session.expire_all()
    row = session.get(WorkerHeartbeat, WORKER_ID)
    assert (row.host, row.pid, row.stopped_at) == ("mail-1", 42, None)
    assert (row.started_at, row.last_tick_at) == (T0, T0 + seconds(5))
    assert row.version == heartbeats.product_version()
