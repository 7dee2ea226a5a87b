"""A SendGrid event whose ``sg_message_id`` is only the ``filter...`` form names our send in
``smtp-id``: its local part is the X-Message-Id we stored as the provider id."""

from __future__ import annotations

import pytest

from console.store.provider_events import match_unmatched_events
from console.vocabulary import AMBIGUOUS, FAILED
from tests.support.event_checks import all_events, load_intent, make_intent
from tests.support.native_signers import native_settings, sendgrid_request
from tests.support.provider_fixtures import dispose, make_events_app

SENDGRID_ID = "wrfRRvF7Q0GgwUo2CvDmEA"


def dropped_unsubscribed() -> dict:
    """django-anymail's test_dropped_unsubscribed_event payload."""
    return {
        "email": "unsubscribe@example.com",
        "anymail_id": "a36ec0f9-aabe-45c7-9a84-3e17afb5cb65",
        "timestamp": 1461095250,
        "smtp-id": f"<{SENDGRID_ID}@ismtpd0006p1sjc2.sendgrid.net>",
        "sg_event_id": "oxy9OLwMTAy5EsuZn1qhIg",
        "sg_message_id": "filter0199p1las1.4745.5717FB6F5.0",
        "reason": "Unsubscribed Address",
        "event": "dropped",
    }


@pytest.fixture
def app(db_url):
    made, _ = make_events_app(db_url, **native_settings())
    yield made
    dispose(made)


def post(app, events) -> int:
    body, headers = sendgrid_request(events)
    return app.test_client().post("/webhooks/sendgrid", data=body, headers=headers).status_code


def test_the_smtp_id_local_part_settles_the_ambiguous_send(app, session_factory):
    intent_id = make_intent(
        session_factory, to="unsubscribe@example.com", status=AMBIGUOUS, provider_id=SENDGRID_ID
    )
    assert post(app, [dropped_unsubscribed()]) == 200
    (event,) = all_events(session_factory)
    assert (event.intent_id, event.unmatched_reason) == (intent_id, None)
    assert load_intent(session_factory, intent_id).status == FAILED


def test_an_event_before_the_id_was_stored_is_matched_later(app, session_factory):
    assert post(app, [dropped_unsubscribed()]) == 200
    assert all_events(session_factory)[0].intent_id is None
    intent_id = make_intent(
        session_factory, to="unsubscribe@example.com", status=AMBIGUOUS, provider_id=SENDGRID_ID
    )
    with session_factory() as session:
        assert match_unmatched_events(session) == 1
        session.commit()
    assert all_events(session_factory)[0].intent_id == intent_id
    assert load_intent(session_factory, intent_id).status == FAILED


def test_a_smtp_id_on_another_host_names_no_provider_id(app, session_factory):
    make_intent(
        session_factory, to="unsubscribe@example.com", status=AMBIGUOUS, provider_id=SENDGRID_ID
    )
    event = {**dropped_unsubscribed(), "smtp-id": f"<{SENDGRID_ID}@mail.example.com>"}
    assert post(app, [event]) == 200
    assert all_events(session_factory)[0].intent_id is None
