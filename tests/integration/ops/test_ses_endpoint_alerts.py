"""The SES endpoint's own set-up: an unsubscribed topic and inbound mail raise alerts."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from console.config import load_settings
from console.ops.alerts.cycle import active_conditions, run_alert_cycle
from tests.support.event_checks import all_events
from tests.support.provider_fixtures import delivery, dispose, make_events_app, sns_signer
from tests.support.provider_payloads.ses_corpus_projects import CASES

UNSUBSCRIBED = "ses_topic_unsubscribed"
INBOUND = "inbound_mail_at_events_endpoint"
INBOUND_CASE = next(case for case in CASES if case.name == "django-ses inbound received")


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url)
    yield app.test_client()
    dispose(app)


@pytest.fixture
def settings(db_url, tmp_path):
    return load_settings({"CONSOLE_DATABASE_URL": db_url}, instance_path=tmp_path)


def keys(session_factory, settings, now=None) -> set[str]:
    now = now or dt.datetime.now(dt.UTC)
    with session_factory() as session:
        return {c.key for c in active_conditions(session, settings, now, catalog=None)}


def test_unsubscribe_confirmation_raises_an_alert_until_events_arrive_again(
    client, session_factory, settings
):
    message = sns_signer().subscription_confirmation(kind="UnsubscribeConfirmation")
    reply = client.post("/webhooks/ses", data=json.dumps(message))
    assert reply.status_code == 200
    [event] = all_events(session_factory)
    assert event.event_type == "topic_unsubscribed" and event.intent_id is None
    assert "Token" not in event.payload and "SubscribeURL" not in event.payload
    assert "subscription" in event.unmatched_reason
    report = run_alert_cycle(session_factory, settings)
    assert UNSUBSCRIBED in report.fired
    resubscribed = sns_signer().notification(delivery("ses-after", "ada@example.com"))
    assert client.post("/webhooks/ses", data=json.dumps(resubscribed)).status_code == 200
    assert UNSUBSCRIBED not in keys(session_factory, settings)
    assert UNSUBSCRIBED in run_alert_cycle(session_factory, settings).cleared


def test_inbound_mail_is_kept_without_content_and_raises_an_alert(
    client, session_factory, settings
):
    message = sns_signer().notification(INBOUND_CASE.message)
    assert client.post("/webhooks/ses", data=json.dumps(message)).status_code == 200
    [event] = all_events(session_factory)
    assert event.event_type == "inbound_mail" and event.matched_at is None
    assert "content" not in event.payload and len(json.dumps(event.payload)) < 1000
    assert "receipt rule" in event.unmatched_reason
    assert INBOUND in run_alert_cycle(session_factory, settings).fired
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=settings.alert_dead_window_seconds + 5)
    assert INBOUND not in keys(session_factory, settings, later)
