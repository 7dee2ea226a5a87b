"""The alert of a provider's lookup API that keeps failing: fired once, kept, cleared.

An ambiguous send through Postmark at the local provider API server
(``tests/support/provider_apis.py``) is asked about by the reconcile job while
the lookup API answers 500; the alert goes through the alert machinery (its
email, its webhook) once, holds through the alert cycle, and clears when
Postmark answers again.
"""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from console.config import load_settings
from console.mail.catalog import catalog_for
from console.models import Intent, utcnow
from console.ops.alerts import cycle
from console.ops.alerts.firing import ALERT_TEMPLATE
from console.ops.alerts.lookups import FAILURES_BEFORE_ALERT
from console.ops.jobs import provider_asking
from console.outbox import enqueue
from console.store.alerts import load_firing_alerts
from console.transports.factory import make_transport
from console.vocabulary import AMBIGUOUS
from tests.support.alert_webhook import Webhook
from tests.support.provider_apis import postmark_role, start_apis, stop_apis

TOKEN = "server-token-0123"
KEY = "provider_lookup_failing:postmark"


@pytest.fixture
def apis():
    server = start_apis(postmark_role(TOKEN))
    yield server
    stop_apis(server)


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def settings(db_url, apis, webhook, tmp_path):
    environ = {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": "k" * 32,
        "CONSOLE_TRANSPORT": "http",
        "CONSOLE_PROVIDER": "postmark",
        "CONSOLE_HTTP_PROVIDER_URL": apis.base_url,
        "CONSOLE_HTTP_PROVIDER_KEY": TOKEN,
        "CONSOLE_SMTP_TIMEOUT_SECONDS": "0.5",
        "CONSOLE_ALERT_EMAIL": "oncall@example.com",
        "CONSOLE_ALERT_WEBHOOK_URL": webhook.url,
    }
    return load_settings(environ, instance_path=tmp_path)


@pytest.fixture
def lookup(settings, session_factory, make_worker, apis):
    """The job's lookup, with one ambiguous welcome mail to ask about."""
    with session_factory() as session:
        params = {"name": "Bob", "login_url": "https://shop.example.com/login"}
        enqueue(session, key="welcome:1", to="ada@example.com", template="welcome", params=params)
        session.commit()
    apis.next("accept-hang")
    make_worker(make_transport(settings), clock=utcnow).run_once(utcnow())
    with session_factory() as session:
        assert session.scalars(select(Intent.status)).one() == AMBIGUOUS
    lookup = provider_asking.lookup_for(settings)
    yield lookup
    lookup.close()


def firing(session_factory) -> list[str]:
    with session_factory() as session:
        return [row.condition for row in load_firing_alerts(session)]


def alert_emails(session_factory) -> list[str]:
    with session_factory() as session:
        query = select(Intent.event).where(Intent.template == ALERT_TEMPLATE)
        return list(session.scalars(query))


def run_job(session_factory, settings, lookup):
    return provider_asking.run(
        session_factory, settings, lookup, catalog_for(settings), sleep=lambda s: None
    )


def test_lookups_that_keep_failing_alert_once_until_they_answer_again(
    session_factory, settings, lookup, apis, webhook
):
    apis.next_lookup(*["500"] * (FAILURES_BEFORE_ALERT + 2))
    for _ in range(FAILURES_BEFORE_ALERT - 1):
        assert run_job(session_factory, settings, lookup).failed == 1
    assert firing(session_factory) == [], "a failure or two is not yet an alert"

    run_job(session_factory, settings, lookup)
    [row] = load_firing_alerts_of(session_factory)
    assert row.condition == KEY and "Postmark" in row.summary and "500" in row.summary
    for _ in range(2):  # still failing, and the alert cycle evaluates meanwhile
        run_job(session_factory, settings, lookup)
        report = cycle.run_alert_cycle(session_factory, settings)
        assert report.cleared == [] and report.fired == []
    assert firing(session_factory) == [KEY]
    assert alert_emails(session_factory) == [f"alert:{KEY}"], "told once"

    run_job(session_factory, settings, lookup)  # Postmark answers again
    assert firing(session_factory) == []
    cycle.run_alert_cycle(session_factory, settings)
    assert webhook.states() == [(KEY, "firing"), (KEY, "resolved")]


def test_the_alert_cycle_clears_it_once_the_provider_is_no_longer_asked(
    session_factory, settings, lookup, apis
):
    apis.next_lookup(*["500"] * FAILURES_BEFORE_ALERT)
    for _ in range(FAILURES_BEFORE_ALERT):
        run_job(session_factory, settings, lookup)
    assert firing(session_factory) == [KEY]

    over_smtp = dataclasses.replace(settings, transport="smtp", alert_webhook_url=None)
    report = cycle.run_alert_cycle(session_factory, over_smtp)

    assert report.cleared == [KEY] and firing(session_factory) == []


def load_firing_alerts_of(session_factory):
    with session_factory() as session:
        return load_firing_alerts(session)
