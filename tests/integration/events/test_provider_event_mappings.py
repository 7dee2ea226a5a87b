"""Provider reports that used to settle nothing: each now fails, suppresses or settles its intent.

Each payload names its source; values are kept as published except the
addresses and ids a test needs to point at its own intent.
"""

from __future__ import annotations

import json
import time

import pytest

from console.events import mailgun
from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED
from tests.support import native_payloads as payloads
from tests.support.event_checks import (
    all_events,
    load_intent,
    make_intent,
    post_sns,
    suppression_map,
)
from tests.support.native_signers import (
    MAILGUN_KEY,
    native_settings,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import dispose, make_events_app

PARENT_KEY = "key-mailgun-parent-account-5d1e"
RESEND_ID = "56761188-7520-42d8-8898-ff6fc54ce618"


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url, **native_settings())
    yield app.test_client()
    dispose(app)


@pytest.fixture
def parent_client(db_url):
    """The console of a Mailgun primary account, which knows its own signing key only."""
    settings = {**native_settings(), "CONSOLE_MAILGUN_PARENT_SIGNING_KEY": PARENT_KEY}
    app, _ = make_events_app(db_url, **settings)
    yield app.test_client()
    dispose(app)


def ok(response) -> dict:
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def reasons(session_factory) -> dict[str, str]:
    return {s.recipient: s.reason for s in suppression_map(session_factory).values()}


# resend.com/docs/webhooks/emails/suppressed: the documented email.suppressed event
RESEND_SUPPRESSED = {
    "type": "email.suppressed",
    "created_at": "2024-11-22T23:41:12.126Z",
    "data": {
        "broadcast_id": "8b146471-e88e-4322-86af-016cd36fd216",
        "created_at": "2024-11-22T23:41:11.894719+00:00",
        "email_id": RESEND_ID,
        "from": "Acme <onboarding@resend.dev>",
        "to": ["delivered@resend.dev"],
        "subject": "Sending this example",
        "template_id": "43f68331-0622-4e15-8202-246a0388854b",
        "suppressed": {
            "message": "Resend has suppressed sending to this address because it is on the "
            "account-level suppression list. This does not count toward your bounce rate metric",
            "type": "OnAccountSuppressionList",
        },
        "tags": {"category": "confirm_email"},
    },
}


def test_resend_suppressed_fails_the_intent_and_suppresses_the_address(client, session_factory):
    intent_id = make_intent(
        session_factory, to="delivered@resend.dev", status=AMBIGUOUS, provider_id=RESEND_ID
    )
    body, headers = resend_request(RESEND_SUPPRESSED, svix_id="msg_suppressed_1")
    assert ok(client.post("/webhooks/resend", data=body, headers=headers))["matched"] == 1
    intent = load_intent(session_factory, intent_id)
    assert intent.status == FAILED and intent.rejected_at is not None
    assert "suppression list" in intent.reject_reason
    assert reasons(session_factory) == {"delivered@resend.dev": "resend-account"}
    [event] = all_events(session_factory)
    assert (event.event_type, event.subtype) == ("rejected", "OnAccountSuppressionList")


def test_a_resend_event_naming_two_recipients_is_recorded_for_each(client, session_factory):
    # the documented email.complained shape ("Event types"), about a message sent to two
    # addresses: Resend names every recipient of the message in data.to
    ada = make_intent(session_factory, to="ada@example.com", provider_id=RESEND_ID)
    bob = make_intent(session_factory, to="bob@example.com", provider_id=RESEND_ID)
    event = payloads.resend("email.complained")
    event["data"]["to"] = ["ada@example.com", "Bob <bob@example.com>"]
    body, headers = resend_request(event, svix_id="msg_two_1")
    reply = ok(client.post("/webhooks/resend", data=body, headers=headers))
    assert (reply["inserted"], reply["matched"]) == (2, 2)
    assert reasons(session_factory) == {
        "ada@example.com": "complaint",
        "bob@example.com": "complaint",
    }
    stored = [(e.source_event_id, e.recipient, e.intent_id) for e in all_events(session_factory)]
    assert stored == [
        ("msg_two_1#1", "ada@example.com", ada),
        ("msg_two_1#2", "bob@example.com", bob),
    ]


# SES Developer Guide, "Bounce object" with bounceSubType OnAccountSuppressionList, the
# recipient written with its display name as SES reports a message addressed that way
def ses_suppressed_bounce(provider_id: str, address: str) -> dict:
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "OnAccountSuppressionList",
            "bouncedRecipients": [
                {
                    "emailAddress": address,
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "Amazon SES did not send the message to this address because "
                    "it is on the suppression list for your account.",
                }
            ],  # fmt: skip
            "timestamp": "2017-08-05T00:41:02.900Z",
            "reportingMTA": "dns; amazonses.com",
            "feedbackId": "0100015dca4b4b3a-account-suppressed",
        },
        "mail": {
            "timestamp": "2017-08-05T00:41:02.669Z",
            "source": "Sender Name <sender@example.com>",
            "messageId": provider_id,
            "destination": [address],
        },
    }


def test_an_ses_recipient_with_a_display_name_is_read_as_its_address(client, session_factory):
    intent_id = make_intent(
        session_factory, to="john@example.com", status=AMBIGUOUS, provider_id="0100015dca4b4b3a"
    )
    post_sns(client, ses_suppressed_bounce("0100015dca4b4b3a", "John <John@Example.com>"))
    assert load_intent(session_factory, intent_id).status == FAILED
    assert reasons(session_factory) == {"john@example.com": "ses-account"}


# SendGrid "Event Webhook Reference", the delivered example; over SendGrid's SMTP relay its
# smtp-id is the Message-ID the message carried, here ours
def sendgrid_event(kind: str, **fields) -> dict:
    [event] = [e for e in payloads.sendgrid_batch() if e["event"] == kind]
    return {**event, **fields}


def test_sendgrid_smtp_id_settles_an_ambiguous_send_without_a_provider_id(client, session_factory):
    ours = "<3f2a9c1e@outbox.localhost>"
    intent_id = make_intent(
        session_factory, to="example@test.com", status=AMBIGUOUS, message_id=ours
    )
    event = sendgrid_event("delivered", **{"smtp-id": ours})
    ok(client.post("/webhooks/sendgrid", **request_of([event])))
    intent = load_intent(session_factory, intent_id)
    assert intent.status == SUBMITTED and intent.delivered_at is not None
    assert intent.provider_message_id == "14c5d75ce93.dfd.64b469", "learnt for later events"


def test_sendgrid_own_smtp_id_does_not_hide_the_provider_id(client, session_factory):
    intent_id = make_intent(
        session_factory,
        to="example@test.com",
        status=AMBIGUOUS,
        provider_id="14c5d75ce93.dfd.64b469",
    )
    ok(client.post("/webhooks/sendgrid", **request_of([sendgrid_event("delivered")])))
    assert load_intent(session_factory, intent_id).status == SUBMITTED


@pytest.mark.parametrize(
    "stored, reported",
    [
        ("14c5d75ce93.dfd.64b469", "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"),
        ("14c5d75ce93.dfd.64b469", "14c5d75ce93.dfd.64b469"),
        # the whole id, as SendGrid's activity feed shows it
        (
            "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
            "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
        ),
    ],  # fmt: skip
    ids=["suffix reported", "no suffix", "whole id stored"],
)
def test_sendgrid_dropped_fails_the_intent_with_or_without_the_suffix(
    client, session_factory, stored, reported
):
    intent_id = make_intent(
        session_factory, to="dropped@test.com", status=AMBIGUOUS, provider_id=stored
    )
    event = sendgrid_event("dropped", sg_message_id=reported)
    assert ok(client.post("/webhooks/sendgrid", **request_of([event])))["matched"] == 1
    assert load_intent(session_factory, intent_id).status == FAILED


def request_of(batch: list[dict]) -> dict:
    body, headers = sendgrid_request(batch)
    return {"data": body, "headers": headers}


# Mailgun "Securing Webhooks": a subaccount's event also carries parent-signature, the same
# HMAC under the primary account's signing key
def subaccount_body(event: dict, *, parent_key: str, token: str) -> bytes:
    timestamp = str(int(time.time()))
    block = {
        "token": token,
        "timestamp": timestamp,
        "signature": mailgun.compute_signature("key-of-the-subaccount", timestamp, token),
        "parent-signature": mailgun.compute_signature(parent_key, timestamp, token),
    }
    return json.dumps({"signature": block, "event-data": event}).encode()


@pytest.mark.parametrize("parent_key, status", [(PARENT_KEY, 200), (MAILGUN_KEY, 401)])
def test_mailgun_parent_signature_is_verified_with_the_parent_key(
    parent_client, session_factory, parent_key, status
):
    body = subaccount_body(payloads.mailgun("delivered"), parent_key=parent_key, token="p" * 50)
    headers = {"Content-Type": "application/json"}
    reply = parent_client.post("/webhooks/mailgun", data=body, headers=headers)
    assert reply.status_code == status, reply.get_json()
    assert len(all_events(session_factory)) == (1 if status == 200 else 0)
