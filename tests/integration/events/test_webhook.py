"""The generic signed webhook at POST /webhooks/generic: HMAC, replay window, replayed ids."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from console.events import EventRejected, webhook
from console.models import Intent, ProviderEvent, Suppression
from console.outbox import enqueue
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app


@pytest.fixture
def events_app(sqlite_url):
    app, _ = make_events_app(sqlite_url)
    yield app
    dispose(app)


@pytest.fixture
def app_on_both(db_url):
    app, _ = make_events_app(db_url)
    yield app
    dispose(app)


LOGIN = dict(template="login-code", params={"code": "1"})


def event_body(**fields) -> bytes:
    event = {
        "id": "evt-1",
        "type": "bounced",
        "provider_message_id": "relay-42",
        "recipient": "ada@example.com",
        "bounce_type": "permanent",
        "diagnostic": "smtp; 550 5.1.1 user unknown",
        "occurred_at": "2025-01-31T12:00:00Z",
        **fields,
    }
    return json.dumps(event).encode()


def post(app, body: bytes, *, secret=WEBHOOK_SECRET, timestamp=None, signature=None):
    timestamp = str(int(time.time())) if timestamp is None else timestamp
    signature = signature or webhook.compute_signature(secret, timestamp, body)
    headers = {webhook.TIMESTAMP_HEADER: timestamp, webhook.SIGNATURE_HEADER: signature}
    return app.test_client().post("/webhooks/generic", data=body, headers=headers)


def counts(app) -> tuple[int, int]:
    with app.app_context():
        from console.web.extensions import db

        events = db.session.scalar(select(func.count()).select_from(ProviderEvent))
        suppressed = db.session.scalar(select(func.count()).select_from(Suppression))
        return events, suppressed


def test_signed_event_is_recorded_and_applied(app_on_both):
    events_app = app_on_both
    with events_app.app_context():
        from console.web.extensions import db

        intent = enqueue(db.session, key="k1", to="ada@example.com", **LOGIN)
        intent.provider_message_id = "relay-42"
        db.session.commit()
        intent_id = intent.id
    response = post(events_app, event_body())
    assert response.status_code == 200, response.get_json()
    assert response.get_json() == {
        "status": "recorded",
        "inserted": 1,
        "duplicates": 0,
        "matched": 1,
    }
    assert counts(events_app) == (1, 1)
    with events_app.app_context():
        from console.web.extensions import db

        stored = db.session.get(Intent, intent_id)
        assert stored.bounce_type == "permanent" and stored.bounced_at is not None


def test_wrong_secret_is_refused(events_app):
    response = post(events_app, event_body(), secret="not-the-secret")
    assert response.status_code == 401
    assert counts(events_app) == (0, 0)


@pytest.mark.parametrize("age_seconds", [310, -310, 86400])  # 300 s window, a slow second
def test_timestamp_outside_the_window_is_refused(events_app, age_seconds):
    stale = str(int(time.time()) - age_seconds)
    response = post(events_app, event_body(), timestamp=stale)
    assert response.status_code == 401 and "replay window" in response.get_json()["error"]
    assert counts(events_app) == (0, 0)


def test_replayed_body_is_refused(app_on_both):
    events_app = app_on_both
    body = event_body()
    timestamp = str(int(time.time()))
    first = post(events_app, body, timestamp=timestamp)
    replay = post(events_app, body, timestamp=timestamp)
    resigned = post(events_app, body)
    assert first.status_code == 200
    assert replay.status_code == 409 and resigned.status_code == 409
    assert counts(events_app) == (1, 1)


def test_tampered_body_is_refused(events_app):
    timestamp = str(int(time.time()))
    signature = webhook.compute_signature(WEBHOOK_SECRET, timestamp, event_body())
    tampered = event_body(recipient="someone-else@example.com")
    response = post(events_app, tampered, timestamp=timestamp, signature=signature)
    assert response.status_code == 401
    assert counts(events_app) == (0, 0)


@pytest.mark.parametrize(
    "headers",
    [{}, {webhook.TIMESTAMP_HEADER: "12x"}, {webhook.TIMESTAMP_HEADER: str(int(time.time()))}],
    ids=["no headers", "bad timestamp", "no signature"],
)
def test_missing_or_malformed_headers_are_refused(events_app, headers):
    response = events_app.test_client().post(
        "/webhooks/generic", data=event_body(), headers=headers
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "body, message",
    [
        (b"[]", "one JSON object"),
        (b"{", "not JSON"),
        (event_body(id=None), "'id' is required"),
        (event_body(type="Bounced!"), "'type'"),
        (event_body(provider_message_id=None), "provider_message_id"),
        (event_body(bounce_type="soft"), "'bounce_type'"),
        (event_body(occurred_at="yesterday"), "'occurred_at'"),
        (event_body(recipient=7), "'recipient' must be a string"),
    ],
)
def test_malformed_events_are_refused_with_a_reason(events_app, body, message):
    response = post(events_app, body)
    assert response.status_code == 400 and message in response.get_json()["error"]
    assert counts(events_app) == (0, 0)


def test_unconfigured_webhook_refuses_everything(sqlite_url):
    app, _ = make_events_app(sqlite_url, CONSOLE_WEBHOOK_SECRET="")
    try:
        response = post(app, event_body())
        assert response.status_code == 503
        assert "CONSOLE_WEBHOOK_SECRET" in response.get_json()["error"]
    finally:
        dispose(app)


def test_verify_signature_uses_the_documented_string():
    import hashlib
    import hmac

    body = b'{"id": "x"}'
    expected = hmac.new(b"s3cret", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert webhook.compute_signature("s3cret", "1700000000", body) == expected
    webhook.verify_signature(
        secret="s3cret",
        timestamp="1700000000",
        signature=expected.upper(),
        body=body,
        now_epoch_seconds=1700000100,
    )
    with pytest.raises(EventRejected):
        webhook.verify_signature(
            secret="s3cret",
            timestamp="1700000000",
            signature=expected,
            body=body + b" ",
            now_epoch_seconds=1700000100,
        )
