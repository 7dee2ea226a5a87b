"""An ambiguous send (no provider id stored) settled by each provider's event, through our
reference in its metadata channel, as that provider returns it.

Each payload names its source; the provider's own ids are kept as published, so
they name no intent here: only the reference can settle the send. The
reference is written out here (intent id, a dash, the first 12 hex digits of
the SHA-256 of its Message-ID) rather than taken from the product.
"""

from __future__ import annotations

import hashlib

import pytest

from console.vocabulary import AMBIGUOUS, SUBMITTED
from tests.support import native_payloads as payloads
from tests.support.event_checks import all_events, load_intent, make_intent, post_sns
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    postmark_headers,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import dispose, make_events_app

TO = "ada@example.com"


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url, **native_settings())
    yield app.test_client()
    dispose(app)


def reference(intent_id: int, message_id: str) -> str:
    return f"{intent_id}-{hashlib.sha256(message_id.encode()).hexdigest()[:12]}"


def ambiguous_intent(session_factory) -> tuple[int, str]:
    intent_id = make_intent(session_factory, to=TO, status=AMBIGUOUS)
    return intent_id, reference(intent_id, load_intent(session_factory, intent_id).message_id)


def ok(response) -> dict:
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def postmark_delivery(ref: str) -> dict:
    # django-anymail tests/test_postmark_webhooks.py (test_delivered_event): Metadata as sent
    record = payloads.postmark("delivery")
    return {**record, "Recipient": TO, "Metadata": {**record["Metadata"], "outbox_ref": ref}}


def mailgun_delivered(ref: str) -> dict:
    # django-anymail tests/test_mailgun_webhooks.py (test_delivered_event); user-variables as
    # Mailgun's "Attaching Data to Messages" shows them (X-Mailgun-Variables)
    event = payloads.mailgun("delivered")
    return {**event, "recipient": TO, "user-variables": {"outbox_ref": ref}}


def sendgrid_delivered(ref: str) -> dict:
    # SendGrid "Event Webhook Reference" delivered example; unique args come back as
    # top-level fields ("Unique arguments and custom arguments")
    [event] = [e for e in payloads.sendgrid_batch() if e["event"] == "delivered"]
    return {**event, "email": TO, "outbox_ref": ref}


def ses_delivery(ref: str) -> dict:
    # SES Developer Guide, "Examples of event data that Amazon SES publishes to Amazon SNS":
    # a Delivery record, its mail.tags holding the message tags (X-SES-MESSAGE-TAGS)
    return {
        "eventType": "Delivery",
        "mail": {
            "timestamp": "2016-10-19T23:20:52.240Z",
            "source": "sender@example.com",
            "sendingAccountId": "123456789012",
            "messageId": "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000",
            "destination": [TO],
            "headersTruncated": False,
            "tags": {
                "ses:configuration-set": ["ConfigSet"],
                "ses:source-ip": ["192.0.2.0"],
                "outbox_ref": [ref],
            },
        },
        "delivery": {
            "timestamp": "2016-10-19T23:21:04.133Z",
            "processingTimeMillis": 11893,
            "recipients": [TO],
            "smtpResponse": "250 2.6.0 Message received",
            "reportingMTA": "mta.example.com",
        },
    }


def resend_delivered(ref: str) -> dict:
    # resend.com/docs/dashboard/webhooks/event-types (email.delivered); data.tags as Resend's
    # email.bounced and email.suppressed examples show them, an object of name -> value
    event = payloads.resend("email.delivered")
    event["data"].update(to=[TO], tags={"outbox_ref": ref})
    return event


def deliver(client, provider: str, ref: str) -> dict:
    """Post `provider`'s delivery event carrying `ref`; return the reply."""
    if provider == "postmark":
        headers = postmark_headers()
        return ok(client.post("/webhooks/postmark", json=postmark_delivery(ref), headers=headers))
    if provider == "mailgun":
        body = mailgun_body(mailgun_delivered(ref), token=f"tok-{ref}")
        headers = {"Content-Type": "application/json"}
        return ok(client.post("/webhooks/mailgun", data=body, headers=headers))
    if provider == "sendgrid":
        body, headers = sendgrid_request([sendgrid_delivered(ref)])
        return ok(client.post("/webhooks/sendgrid", data=body, headers=headers))
    if provider == "ses":
        return post_sns(client, ses_delivery(ref))
    body, headers = resend_request(resend_delivered(ref), svix_id=f"msg_{ref}")
    return ok(client.post("/webhooks/resend", data=body, headers=headers))


PROVIDERS = ("postmark", "mailgun", "sendgrid", "ses", "resend")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_reference_settles_an_ambiguous_send(client, session_factory, provider):
    intent_id, ref = ambiguous_intent(session_factory)
    assert deliver(client, provider, ref)["matched"] == 1
    intent = load_intent(session_factory, intent_id)
    assert intent.status == SUBMITTED and intent.delivered_at is not None
    assert intent.provider_message_id, "the provider's own id is learnt for later events"
    [event] = all_events(session_factory)
    assert (event.intent_id, event.message_id) == (intent_id, intent.message_id)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reference_of_another_database_settles_nothing(client, session_factory, provider):
    intent_id, _ = ambiguous_intent(session_factory)
    foreign = reference(intent_id, "<another-message@elsewhere.example>")
    assert deliver(client, provider, foreign)["matched"] == 0
    assert load_intent(session_factory, intent_id).status == AMBIGUOUS
    [event] = all_events(session_factory)
    assert event.intent_id is None and event.unmatched_reason
