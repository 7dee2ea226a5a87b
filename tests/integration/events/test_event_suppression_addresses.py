"""A provider event suppresses only a real address: one, of valid syntax."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import select

from console.events import webhook
from console.models import ProviderEvent, Suppression
from console.web.extensions import db
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app


@pytest.fixture
def events_app(db_url):
    app, _ = make_events_app(db_url)
    yield app
    dispose(app)


def bounce(app, recipient: str, event_id: str):
    body = json.dumps(
        {
            "id": event_id,
            "type": "bounced",
            "provider_message_id": "relay-42",
            "recipient": recipient,
            "bounce_type": "permanent",
            "diagnostic": "smtp; 550 5.1.1 user unknown",
            "occurred_at": "2025-01-31T12:00:00Z",
        }
    ).encode()
    timestamp = str(int(time.time()))
    headers = {
        webhook.TIMESTAMP_HEADER: timestamp,
        webhook.SIGNATURE_HEADER: webhook.compute_signature(WEBHOOK_SECRET, timestamp, body),
    }
    return app.test_client().post("/webhooks/generic", data=body, headers=headers)


@pytest.mark.parametrize(
    "recipient",
    [
        "NOT AN ADDRESS <script>",
        "Ada <ada@example.com>",
        "ada@example.com, eve@example.com",
        "ada@example.com eve@example.com",
        "no-at-sign.example.com",
        "ada@",
        "<script>alert(1)</script>@example.com",
    ],
)
def test_an_event_naming_no_single_valid_address_suppresses_nothing(events_app, recipient):
    response = bounce(events_app, recipient, "evt-1")
    assert response.status_code == 200, response.text
    with events_app.app_context():
        assert db.session.scalars(select(Suppression.recipient)).all() == []
        event = db.session.execute(select(ProviderEvent)).scalar_one()
        assert event.recipient == recipient[:320], "the event is kept as the provider sent it"
        assert event.unmatched_reason == "not suppressed: invalid address"


def test_an_event_naming_a_real_address_suppresses_it(events_app):
    assert bounce(events_app, "Ada@Example.com", "evt-2").status_code == 200
    with events_app.app_context():
        assert db.session.scalars(select(Suppression.recipient)).all() == ["ada@example.com"]
