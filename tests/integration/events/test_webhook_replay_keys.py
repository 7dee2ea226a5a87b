"""Used webhook keys live in the database: every process refuses a replay, and retries live.

Mailgun retries a delivery it could not hand over after 5 min, 10 min, 15 min,
1 h, 2 h and 4 h with the original signature block ("Automatic Retries" in
Mailgun's webhook documentation); its token is what makes one signature block
one delivery only.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from sqlalchemy import func, select

from console.ops.jobs.retention import prune
from console.state_tables import WebhookReplayKey
from tests.support import native_payloads as payloads
from tests.support.event_checks import all_events, suppression_map
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import dispose, make_events_app

TOKEN = "e0b5477167110d68991efc6b9f89f0a11066af27834600e123"  # Mailgun's documented shape


@pytest.fixture
def apps(db_url):
    """Two console processes on one database; a third is the first one restarted."""
    made = [make_events_app(db_url, **native_settings())[0] for _ in range(3)]
    yield made
    for app in made:
        dispose(app)


def post_mailgun(app, body):
    return app.test_client().post(
        "/webhooks/mailgun", data=body, headers={"Content-Type": "application/json"}
    )


def ago(seconds: float) -> str:
    return str(int(time.time() - seconds))


@pytest.mark.parametrize("delay_seconds", [305, 4 * 3600])
def test_a_mailgun_retry_later_than_five_minutes_is_accepted_once(apps, delay_seconds):
    body = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(delay_seconds))
    assert post_mailgun(apps[0], body).status_code == 200
    # a request already recorded: 406, the answer Mailgun does not retry
    assert post_mailgun(apps[0], body).status_code == 406
    assert post_mailgun(apps[1], body).status_code == 406


def test_a_mailgun_signature_older_than_the_replay_window_is_refused(sqlite_url):
    app, _ = make_events_app(sqlite_url, **native_settings(), CONSOLE_MAILGUN_REPLAY_SECONDS="3600")
    try:
        stale = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(3700))
        assert post_mailgun(app, stale).status_code == 401
        fresh = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(3500))
        assert post_mailgun(app, fresh).status_code == 200
    finally:
        dispose(app)


def with_event_data(body: bytes, event: dict) -> bytes:
    data = json.loads(body)
    return json.dumps({**data, "event-data": event}).encode()


def forged_complaint() -> dict:
    event = payloads.mailgun("delivered")
    event.update(id="forged-1", event="complained", recipient="victim@example.com")
    return event


def test_a_captured_mailgun_signature_with_forged_event_data_is_refused_everywhere(
    apps, session_factory
):
    genuine = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(10))
    assert post_mailgun(apps[0], genuine).status_code == 200
    forged = with_event_data(genuine, forged_complaint())  # the captured signature block
    assert post_mailgun(apps[1], forged).status_code == 406, "another process"
    assert post_mailgun(apps[2], forged).status_code == 406, "after a restart"
    assert suppression_map(session_factory) == {}
    assert [e.event_type for e in all_events(session_factory)] == ["delivered"]


def test_svix_and_sendgrid_replays_are_refused_by_another_process(apps):
    body, headers = resend_request(payloads.resend("email.delivered"), svix_id="msg_replayed")
    client = apps[0].test_client()
    assert client.post("/webhooks/resend", data=body, headers=headers).status_code == 200
    again = apps[1].test_client().post("/webhooks/resend", data=body, headers=headers)
    assert again.status_code == 409
    body, headers = sendgrid_request(payloads.sendgrid_batch()[:1])
    assert client.post("/webhooks/sendgrid", data=body, headers=headers).status_code == 200
    again = apps[1].test_client().post("/webhooks/sendgrid", data=body, headers=headers)
    assert again.status_code == 409


def test_a_refused_request_leaves_no_key_so_its_retry_is_accepted(apps):
    no_event = mailgun_body({"id": "x"}, token=TOKEN, timestamp=ago(10))
    assert post_mailgun(apps[0], no_event).status_code == 400
    body = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(10))
    assert post_mailgun(apps[1], body).status_code == 200


def replay_keys(session_factory) -> int:
    with session_factory() as session:
        return session.scalar(select(func.count()).select_from(WebhookReplayKey))


def test_retention_forgets_the_keys_whose_window_is_over(apps, session_factory):
    body = mailgun_body(payloads.mailgun("delivered"), token=TOKEN, timestamp=ago(10))
    assert post_mailgun(apps[0], body).status_code == 200
    assert replay_keys(session_factory) == 1
    now = dt.datetime.now(dt.UTC)
    prune(session_factory, retention_days=30, now=now + dt.timedelta(hours=1))
    assert replay_keys(session_factory) == 1, "Mailgun's token is kept for its 8 hours"
    report = prune(session_factory, retention_days=30, now=now + dt.timedelta(hours=17))
    assert (report.replay_keys_deleted, replay_keys(session_factory)) == (1, 0)
