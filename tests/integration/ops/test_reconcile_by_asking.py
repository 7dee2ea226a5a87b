"""Settling ambiguous sends by asking Postmark, Mailgun and SendGrid, against a real local server.

The worker sends through the native transport to ``tests/support/provider_apis.py``,
the send's answer is lost (so the intent is ambiguous), and the ``reconcile`` job
asks the provider's lookup API (Postmark's outbound message search, Mailgun's
event log, SendGrid's Email Activity) what it has.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import select, update

from console.config import load_settings
from console.mail.catalog import catalog_for
from console.models import Intent, ProviderEvent, utcnow
from console.ops.jobs.provider_asking import lookup_for, run
from console.ops.jobs.schedule import OpsJobs
from console.outbox import enqueue
from console.store.provider_lookups import NOT_FOUND_EVENT
from console.vocabulary import AMBIGUOUS, PENDING, SUBMITTED
from tests.support.provider_apis import (
    MAILGUN_DOMAIN,
    mailgun_role,
    postmark_role,
    sendgrid_role,
    start_apis,
    stop_apis,
)

TOKEN = "server-token-0123"
WELCOME = {"name": "Bob", "login_url": "https://shop.example.com/login"}  # policy hold
HORIZON_SECONDS = 1800.0


@pytest.fixture(params=["postmark", "mailgun", "sendgrid"])
def provider(request):
    return request.param


@pytest.fixture
def apis():
    server = start_apis(postmark_role(TOKEN), mailgun_role(TOKEN), sendgrid_role(TOKEN))
    yield server
    stop_apis(server)


@pytest.fixture
def settings(provider, apis, db_url, tmp_path):
    env = {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": "k" * 32,
        "CONSOLE_TRANSPORT": "http",
        "CONSOLE_PROVIDER": provider,
        "CONSOLE_HTTP_PROVIDER_URL": apis.base_url,
        "CONSOLE_HTTP_PROVIDER_KEY": TOKEN,
        "CONSOLE_MAILGUN_DOMAIN": MAILGUN_DOMAIN,
        "CONSOLE_SMTP_TIMEOUT_SECONDS": "0.5",
        "CONSOLE_RECONCILE_AFTER_SECONDS": str(HORIZON_SECONDS),
    }
    return load_settings(env, instance_path=tmp_path)


@pytest.fixture
def ambiguous(session_factory, make_worker, settings, apis):
    """Send one intent of `template` whose answer is lost; return its id once ambiguous."""
    from console.transports.factory import make_transport

    worker = make_worker(make_transport(settings), clock=utcnow)

    def send(behaviour, *, template="welcome", params=WELCOME, key="welcome:1", crashed=False):
        with session_factory() as session:
            intent_id = enqueue(
                session, key=key, to="ada@example.com", template=template, params=params
            ).id
            session.commit()
        apis.next(behaviour)
        worker.run_once(utcnow() + dt.timedelta(seconds=1))
        with session_factory() as session:
            if crashed:  # the worker died before its answer was recorded
                session.execute(
                    update(Intent).where(Intent.id == intent_id).values(status=AMBIGUOUS)
                )
                session.commit()
            assert session.get(Intent, intent_id).status == AMBIGUOUS
        return intent_id

    send.worker = worker
    return send


def ask(session_factory, settings, *, later_seconds: float = 0.0):
    lookup = lookup_for(settings)
    try:
        clock = lambda: utcnow() + dt.timedelta(seconds=later_seconds)  # noqa: E731
        return run(
            session_factory,
            settings,
            lookup,
            catalog_for(settings),
            clock=clock,
            sleep=lambda s: None,
        )
    finally:
        lookup.close()


def events_of(session_factory, intent_id):
    with session_factory() as session:
        query = select(ProviderEvent).where(ProviderEvent.intent_id == intent_id)
        return session.scalars(query).all()


def test_found_settles_it_as_submitted_with_the_provider_id(
    session_factory, settings, apis, ambiguous, provider
):
    intent_id = ambiguous("accept-hang")
    report = ask(session_factory, settings)
    [sent] = apis.role(provider).sends
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        assert intent.status == SUBMITTED
        assert intent.provider_message_id == sent["id"].strip("<>")
    [event] = events_of(session_factory, intent_id)
    assert event.source == provider and event.event_type == "accepted"
    assert dataclasses.astuple(report)[:2] == (1, 1)
    requests = 2 if provider == "sendgrid" else 1  # SendGrid's list, then the message's details
    assert len(apis.lookups) == requests and len(apis.role(provider).sends) == 1, "sent once"


def test_not_found_before_the_horizon_asks_again_later(session_factory, settings, apis, ambiguous):
    intent_id = ambiguous("drop-hang")
    first = ask(session_factory, settings)
    second = ask(session_factory, settings)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == AMBIGUOUS
    assert (first.asked, second.asked) == (1, 1) and events_of(session_factory, intent_id) == []


def test_not_found_after_the_horizon_holds_with_a_note_once(
    session_factory, settings, apis, ambiguous, provider
):
    intent_id = ambiguous("drop-hang")
    report = ask(session_factory, settings, later_seconds=HORIZON_SECONDS + 60)
    again = ask(session_factory, settings, later_seconds=HORIZON_SECONDS + 60)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == AMBIGUOUS
    [note] = events_of(session_factory, intent_id)
    assert note.event_type == NOT_FOUND_EVENT and "has no record of it" in note.diagnostic
    assert report.held == 1 and again.asked == 0, "asked once per attempt"
    assert apis.role(provider).sends == []


def test_not_found_after_the_horizon_resends_a_login_code_once(
    session_factory, settings, apis, ambiguous, provider
):
    """A login code (policy resend) left ambiguous by a crash, as the lease sweep leaves it."""
    intent_id = ambiguous(
        "drop-hang", template="login-code", params={"code": "7"}, key="login:7", crashed=True
    )
    report = ask(session_factory, settings, later_seconds=HORIZON_SECONDS + 60)
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        assert intent.status == PENDING and report.resent == 1
        message_id = intent.message_id
    ambiguous.worker.run_once(utcnow() + dt.timedelta(seconds=2))
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == SUBMITTED
    [sent] = apis.role(provider).sends
    assert message_id.strip("<>") in str(sent["fields"]), "the same Message-ID"


@pytest.mark.parametrize("failure", ["500", "malformed", "huge"])
def test_a_failed_lookup_leaves_the_intent_as_it_was(
    session_factory, settings, apis, ambiguous, failure
):
    intent_id = ambiguous("accept-hang")
    apis.next_lookup(failure)
    report = ask(session_factory, settings, later_seconds=HORIZON_SECONDS + 60)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == AMBIGUOUS
    assert report.failed == 1 and events_of(session_factory, intent_id) == []


def test_the_job_runs_only_where_the_provider_can_answer(settings, tmp_path):
    jobs = OpsJobs(settings).start(first_retention_delay_seconds=3600)
    try:
        assert jobs.scheduler.get_job("reconcile") is not None
    finally:
        jobs.shutdown()
    resend = dataclasses.replace(settings, provider="resend")
    assert lookup_for(resend) is None
    assert lookup_for(dataclasses.replace(settings, provider="ses")) is None
