"""An ambiguous send (no provider id stored) settled by each provider's event, through our
reference in its metadata channel, as that provider returns it.

Each payload names its source; the provider's own ids are kept as published, so
they name no intent here: only the reference can settle the send. The
reference is written out here (intent id, a dash, the first 12 hex digits of
the SHA-256 of its Message-ID) rather than taken from the product.
"""

from __future__ import annotations

import email
import hashlib
import json

import pytest

from console.transports.smtp import SmtpTransport
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
from tests.support.orders import enqueue_orders
from tests.support.provider_fixtures import dispose, make_events_app
from tests.support.smtp_server import ScriptedSMTPServer

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


# --- over SMTP: the worker writes the reference in the provider's header ---


def reference_in_header(provider: str, message: email.message.Message) -> str:
    """The reference as each provider reads its metadata header (its documented format)."""
    if provider == "postmark":  # X-PM-Metadata-<key>: value
        return message["X-PM-Metadata-outbox_ref"]
    if provider == "mailgun":  # X-Mailgun-Variables: a JSON object
        return json.loads(message["X-Mailgun-Variables"])["outbox_ref"]
    if provider == "sendgrid":  # X-SMTPAPI: {"unique_args": {...}}
        return json.loads(message["X-SMTPAPI"])["unique_args"]["outbox_ref"]
    return dict(  # X-SES-MESSAGE-TAGS: name=value, name=value
        tag.strip().split("=", 1) for tag in message["X-SES-MESSAGE-TAGS"].split(",")
    )["outbox_ref"]


@pytest.mark.parametrize("provider", ["postmark", "mailgun", "sendgrid", "ses"])
def test_a_send_over_smtp_whose_reply_is_lost_is_settled_through_its_header(
    client, session_factory, make_worker, provider
):
    [intent_id] = enqueue_orders(session_factory, [TO])
    with ScriptedSMTPServer() as server:
        server.script.set(TO, ["hangup"])  # the body arrives, the reply never comes
        transport = SmtpTransport(server.url, timeout_seconds=2.0)
        make_worker(transport, provider=provider).run_once()
        [received] = server.received
    assert load_intent(session_factory, intent_id).status == AMBIGUOUS
    message = email.message_from_bytes(received.content)
    ref = reference_in_header(provider, message)
    assert ref == reference(intent_id, load_intent(session_factory, intent_id).message_id)

    assert deliver(client, provider, ref)["matched"] == 1
    assert load_intent(session_factory, intent_id).status == SUBMITTED


def test_without_a_provider_no_metadata_header_is_written(session_factory, make_worker):
    enqueue_orders(session_factory, [TO])
    with ScriptedSMTPServer() as server:
        make_worker(SmtpTransport(server.url, timeout_seconds=2.0)).run_once()
        [received] = server.received
    headers = email.message_from_bytes(received.content).keys()
    assert not [
        name
        for name in headers
        if name.upper().startswith(("X-PM-", "X-MAILGUN", "X-SMTPAPI", "X-SES"))
    ]
