"""Per-domain back-off that holds: stored per domain, skipped by every claim, honoured mid-batch.

A real SMTP server answers ``421 4.7.0 try later`` for one domain, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from console.core.domain_backoff import DomainBackoffPolicy
from console.models import Attempt, Intent
from console.state_tables import DomainDeferral
from console.transports.smtp import SmtpTransport
from console.vocabulary import PENDING, SUBMITTED
from console.worker.guard import GuardPolicy
from tests.support.orders import enqueue_orders
from tests.support.smtp_server import ScriptedSMTPServer

THROTTLED = [f"{name}@slow.example" for name in "abcdef"]
FINE = [f"{name}@fine.example" for name in "wxyz"]
POLICY = DomainBackoffPolicy(run_length=3, base_seconds=600, cap_seconds=3600)


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        for address in THROTTLED:
            server.script.set(address, ["rcpt:421 4.7.0 try later"])
        yield server


@pytest.fixture
def deferring_worker(make_worker, smtp_server):
    def build(**options):
        transport = SmtpTransport(smtp_server.url, timeout_seconds=2)
        return make_worker(transport, guard_policy=GuardPolicy(domains=POLICY), **options)

    return build


def test_a_deferral_mid_batch_gives_back_the_rest_of_that_domain_unsent(
    session_factory, deferring_worker, smtp_server
):
    throttled_ids = enqueue_orders(session_factory, THROTTLED)
    fine_ids = enqueue_orders(session_factory, FINE, prefix="fine")
    report = deferring_worker(batch_size=10).run_once()
    assert report.claimed == 10
    with session_factory() as session:
        deferral = session.get(DomainDeferral, "slow.example")
        assert deferral is not None and deferral.reply_code == 421
        throttled = [session.get(Intent, intent_id) for intent_id in throttled_ids]
        tried = [intent for intent in throttled if intent.attempt_count > 0]
        held_back = [intent for intent in throttled if intent.attempt_count == 0]
        # the run of three completes the deferral; at most the send already under way
        # when it was recorded goes out after it
        assert 3 <= len(tried) <= 4
        assert len(held_back) >= 2
        for intent in held_back:
            assert intent.status == PENDING
            # back with its place in the queue: the claim skips the domain until its end
            assert intent.next_attempt_at < deferral.deferred_until
            attempts = session.scalars(select(Attempt).where(Attempt.intent_id == intent.id))
            assert attempts.all() == [], "given back without an attempt"
        assert {session.get(Intent, i).status for i in fine_ids} == {SUBMITTED}
    assert {message.recipient for message in smtp_server.received} == set(FINE)


def test_a_new_enqueue_for_a_deferred_domain_waits_for_the_deferral_to_end(
    session_factory, deferring_worker, smtp_server, clock
):
    until = clock() + dt.timedelta(minutes=10)
    with session_factory() as session:
        session.add(
            DomainDeferral(domain="later.example", deferred_until=until, updated_at=clock())
        )
        session.commit()
    [waiting_id] = enqueue_orders(session_factory, ["ada@later.example"], prefix="later")
    [other_id] = enqueue_orders(session_factory, ["bob@fine.example"], prefix="other")
    worker = deferring_worker()
    assert worker.run_once().claimed == 1, "only the intent of the domain not deferred"
    with session_factory() as session:
        assert session.get(Intent, waiting_id).status == PENDING
        assert session.get(Intent, other_id).status == SUBMITTED
    clock.set(until + dt.timedelta(seconds=1))
    assert worker.run_once().claimed == 1
    with session_factory() as session:
        assert session.get(Intent, waiting_id).status == SUBMITTED


def test_the_dashboard_lists_deferred_domains_with_their_end_times(app, console_client):
    from console.models import utcnow
    from console.web.extensions import db

    until = (utcnow() + dt.timedelta(minutes=5)).replace(microsecond=0)
    with app.app_context():
        db.session.add(
            DomainDeferral(
                domain="slow.example", deferred_until=until, reply_code=421, updated_at=utcnow()
            )
        )
        db.session.add(
            DomainDeferral(
                domain="over.example",
                deferred_until=utcnow() - dt.timedelta(minutes=1),
                updated_at=utcnow(),
            )
        )
        db.session.commit()
    page = console_client("viewer").get("/").get_data(as_text=True)
    assert "slow.example" in page and f"{until:%Y-%m-%d %H:%M:%S} UTC" in page
    assert "over.example" not in page, "a deferral that ended is not listed"
