"""The writes an outcome calls for, called on each engine as the worker calls them: a
refused mailbox's suppression, an alert fired once, a refused session's hold only while
the lease holds (the breaker, the deferral and the rate: ``test_engine_contract``)."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select, update

from console.models import Suppression
from console.state_tables import AlertState
from console.vocabulary import PENDING, SENDING
from tests.support.claim_steps import T0, claim_all, load, on_engine, queue, seconds


def test_a_refused_mailbox_is_suppressed_once_naming_its_attempt(engine, session_factory, session):
    def suppress(attempt_id):
        return on_engine(
            engine,
            lambda e: e.suppress_refused_mailbox(
                "Ada@Example.com", "550 5.1.1 no such user", attempt_id, T0
            ),
        )

    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    assert suppress(claim.attempt_id)
    assert not suppress(claim.attempt_id), "on the list already"
    [row] = session.scalars(select(Suppression)).all()
    assert (row.recipient, row.reason, row.source_attempt_id) == (
        "ada@example.com",
        "bounce",
        claim.attempt_id,
    )
    assert row.note == "550 5.1.1 no such user" and row.created_at == T0
    assert load(session_factory, intent_id)[0].status == SENDING


def test_an_alert_fires_once_until_it_is_cleared(engine, session):
    def fire(now):
        details = {"relay": "mx.example", "reply": "535 nope"}
        return on_engine(engine, lambda e: e.fire_alert("relay_refused:bulk", "s", details, now))

    assert fire(T0)
    assert not fire(T0 + seconds(1)), "firing already"
    row = session.get(AlertState, "relay_refused:bulk")
    assert (row.active, row.fired_at, row.webhook_due) == (True, T0, "firing")
    assert row.details == {"relay": "mx.example", "reply": "535 nope"}
    session.execute(
        update(AlertState).values(active=False, cleared_at=T0 + seconds(2), webhook_due=None)
    )
    session.commit()
    assert fire(T0 + seconds(3)), "cleared, then firing again"
    session.expire_all()
    row = session.get(AlertState, "relay_refused:bulk")
    assert (row.active, row.fired_at, row.cleared_at) == (True, T0 + seconds(3), None)


def test_a_refused_session_holds_the_intent_uncharged_only_while_its_lease_holds(
    engine, session_factory, session
):
    intent_id = queue(session_factory)
    [claim] = claim_all(session)
    due_at = T0 + seconds(300)

    def hold(token):
        held = dataclasses.replace(claim, lease_token=token)
        return on_engine(engine, lambda e: e.hold_refused(held, due_at, "535 auth failed", T0))

    assert not hold("another worker's"), "a lost lease changes nothing"
    intent, [attempt] = load(session_factory, intent_id)
    assert (intent.status, intent.attempt_count) == (SENDING, 1)

    assert hold(claim.lease_token)
    intent, attempts = load(session_factory, intent_id)
    assert (intent.status, intent.attempt_count, intent.next_attempt_at) == (PENDING, 0, due_at)
    assert (intent.lease_token, intent.status_reason, attempts) == (None, "535 auth failed", [])
