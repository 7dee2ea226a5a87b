"""Native webhooks map each provider's report to the same facts, matched like SES events.

Payloads: ``tests/support/native_payloads.py`` (each names its source).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED
from tests.support import native_payloads as payloads
from tests.support.event_checks import (
    all_events,
    audit_of,
    load_intent,
    make_intent,
    suppression_map,
)
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    postmark_headers,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import dispose, make_events_app

RESEND_ID = "56761188-7520-42d8-8898-ff6fc54ce618"


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url, **native_settings())
    yield app.test_client()
    dispose(app)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def ok(response) -> dict:
    assert response.status_code == 200, response.get_json()
    return response.get_json()


# kind -> (recipient, provider id, status after, fact column, suppression reason)
RESEND_CASES = {
    "email.sent": ("delivered@resend.dev", RESEND_ID, SUBMITTED, None, None),
    "email.delivered": ("delivered@resend.dev", RESEND_ID, SUBMITTED, "delivered_at", None),
    "email.delivery_delayed": ("delivered@resend.dev", RESEND_ID, SUBMITTED, "delayed_at", None),
    "email.complained": (
        "delivered@resend.dev", RESEND_ID, SUBMITTED, "complained_at", "complaint"),
    "bounced-hard": (
        "bounced@resend.dev", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", SUBMITTED, "bounced_at",
        "bounce"),
    "bounced-suppressed": (
        "delivered@resend.dev", RESEND_ID, FAILED, "rejected_at", "resend-account"),
    "failed": ("delivered@resend.dev", RESEND_ID, FAILED, "rejected_at", None),
}  # fmt: skip


@pytest.mark.parametrize("kind", RESEND_CASES)
def test_resend_events(client, session_factory, kind):
    recipient, provider_id, status, fact, suppressed_as = RESEND_CASES[kind]
    intent_id = make_intent(
        session_factory, to=recipient, status=AMBIGUOUS, provider_id=provider_id
    )
    event = payloads.resend(kind)
    body, headers = resend_request(event, svix_id=f"msg_{kind}")
    assert ok(client.post("/webhooks/resend", data=body, headers=headers))["matched"] == 1
    intent = load_intent(session_factory, intent_id)
    assert intent.status == status
    if fact:
        assert getattr(intent, fact) == at(event["created_at"])
    reasons = {s.recipient: s.reason for s in suppression_map(session_factory).values()}
    assert reasons == ({recipient: suppressed_as} if suppressed_as else {})
    [stored] = all_events(session_factory)
    assert (stored.source, stored.source_event_id) == ("resend", f"msg_{kind}")
    if status == FAILED:
        assert intent.reject_reason and intent.status_reason.startswith("not sent:")
        [audit] = audit_of(session_factory, intent_id)[-1:]
        assert (audit.before_status, audit.after_status) == (AMBIGUOUS, FAILED)


def test_resend_bounce_is_permanent_unless_resend_says_otherwise(client, session_factory):
    make_intent(session_factory, to="delivered@resend.dev", provider_id=RESEND_ID)
    event = payloads.resend("bounced-suppressed")
    event["data"]["bounce"] = {"type": "Transient", "subType": "MailboxFull", "message": "full"}
    body, headers = resend_request(event, svix_id="m1")
    ok(client.post("/webhooks/resend", data=body, headers=headers))
    [stored] = all_events(session_factory)
    assert (stored.bounce_type, stored.subtype) == ("transient", "MailboxFull")
    assert suppression_map(session_factory) == {}


# kind -> (recipient, provider id, event type, bounce type, fact column, suppression reason)
POSTMARK_CASES = {
    "hard_bounce": ("bounce@example.com", "2706ee8a-737c-4285-b032-ccd317af53ed", "bounced",
                    "permanent", "bounced_at", "bounce"),
    "soft_bounce": ("bounce@example.com", "2706ee8a-737c-4285-b032-ccd317af53ed", "bounced",
                    "transient", "bounced_at", None),
    "transient": ("bounce@example.com", "2706ee8a-737c-4285-b032-ccd317af53ed", "delayed",
                  None, "delayed_at", None),
    "delivery": ("recipient@example.com", "883953f4-6105-42a2-a16a-77a8eac79483", "delivered",
                 None, "delivered_at", None),
    "spam_complaint": ("spam@example.com", "2706ee8a-737c-4285-b032-ccd317af53ed",
                       "complained", None, "complained_at", "complaint"),
    "subscription_change": ("john@example.com", "a4909a96-73d7-4c49-b148-a54522d3f7ac",
                            "suppressed", None, None, "postmark-account"),
}  # fmt: skip


@pytest.mark.parametrize("kind", POSTMARK_CASES)
def test_postmark_records(client, session_factory, kind):
    recipient, provider_id, event_type, bounce_type, fact, suppressed_as = POSTMARK_CASES[kind]
    intent_id = make_intent(
        session_factory, to=recipient, status=AMBIGUOUS, provider_id=provider_id
    )
    record = payloads.postmark(kind)
    reply = ok(
        client.post("/webhooks/postmark", data=json.dumps(record), headers=postmark_headers())
    )
    assert reply["matched"] == 1
    [stored] = all_events(session_factory)
    assert (stored.event_type, stored.bounce_type) == (event_type, bounce_type)
    intent = load_intent(session_factory, intent_id)
    if fact:
        assert getattr(intent, fact) is not None
    assert intent.status == (AMBIGUOUS if event_type == "suppressed" else SUBMITTED)
    reasons = {s.recipient: s.reason for s in suppression_map(session_factory).values()}
    assert reasons == ({recipient: suppressed_as} if suppressed_as else {})


def test_postmark_type_code_decides_over_the_type_name(client, session_factory):
    record = payloads.postmark("hard_bounce")
    record.update(ID=7, TypeCode=100000, Type="SomethingNew")  # BadEmailAddress
    ok(client.post("/webhooks/postmark", data=json.dumps(record), headers=postmark_headers()))
    record.update(ID=8, TypeCode=64, Type="AutoResponder", Email="ooo@example.com")
    ok(client.post("/webhooks/postmark", data=json.dumps(record), headers=postmark_headers()))
    bad_address, auto_reply = all_events(session_factory)
    assert (bad_address.bounce_type, bad_address.subtype) == ("permanent", "BadEmailAddress")
    assert (auto_reply.event_type, auto_reply.bounce_type) == ("auto_responder", None)
    assert set(suppression_map(session_factory)) == {"bounce@example.com"}


# kind -> (recipient, status after, event type, bounce type, suppression reason)
MAILGUN_CASES = {
    "delivered": ("recipient@example.com", SUBMITTED, "delivered", None, None),
    "failed_permanent": ("invalid@example.com", SUBMITTED, "bounced", "permanent", "bounce"),
    "failed_temporary": ("undeliverable@nomx.example.com", SUBMITTED, "delayed", None, None),
    "suppressed": ("invalid@example.com", FAILED, "rejected", None, "mailgun-account"),
}


@pytest.mark.parametrize("kind", MAILGUN_CASES)
def test_mailgun_events_match_by_their_message_id(client, session_factory, kind):
    recipient, status, event_type, bounce_type, suppressed_as = MAILGUN_CASES[kind]
    event = payloads.mailgun(kind)
    header = event["message"]["headers"]["message-id"]
    intent_id = make_intent(
        session_factory, to=recipient, status=AMBIGUOUS, message_id=f"<{header}>"
    )
    body = mailgun_body(event, token=f"token-{kind}")
    headers = {"Content-Type": "application/json"}
    assert ok(client.post("/webhooks/mailgun", data=body, headers=headers))["matched"] == 1
    [stored] = all_events(session_factory)
    assert (stored.event_type, stored.bounce_type) == (event_type, bounce_type)
    assert stored.occurred_at == dt.datetime.fromtimestamp(event["timestamp"], dt.UTC)
    intent = load_intent(session_factory, intent_id)
    assert intent.status == status and intent.provider_message_id == header
    reasons = {s.recipient: s.reason for s in suppression_map(session_factory).values()}
    assert reasons == ({recipient: suppressed_as} if suppressed_as else {})


def test_mailgun_permanent_failure_after_4xx_retries_does_not_suppress(client, session_factory):
    event = payloads.mailgun("failed_permanent")
    event["reason"], event["delivery-status"]["code"] = "old", 421
    body = mailgun_body(event, token="token-old")
    ok(client.post("/webhooks/mailgun", data=body, headers={"Content-Type": "application/json"}))
    [stored] = all_events(session_factory)
    assert (stored.bounce_type, stored.subtype) == ("transient", "old")
    assert suppression_map(session_factory) == {}


def test_sendgrid_batch_maps_every_event(client, session_factory):
    intent_id = make_intent(
        session_factory,
        to="example@test.com",
        status=AMBIGUOUS,
        provider_id="14c5d75ce93.dfd.64b469",
    )
    dropped_id = make_intent(
        session_factory, to="dropped@test.com", provider_id="14c5d75ce93.dfd.64b469"
    )
    body, headers = sendgrid_request(payloads.sendgrid_batch())
    reply = ok(client.post("/webhooks/sendgrid", data=body, headers=headers))
    assert (reply["inserted"], reply["matched"]) == (7, 7)
    kinds = [(e.event_type, e.bounce_type) for e in all_events(session_factory)]
    assert kinds == [("accepted", None), ("delayed", None), ("delivered", None),
                     ("bounced", "permanent"), ("complained", None), ("rejected", None),
                     ("open", None)]  # fmt: skip
    intent = load_intent(session_factory, intent_id)
    assert intent.status == SUBMITTED
    assert None not in (intent.delivered_at, intent.delayed_at, intent.bounced_at,
                        intent.complained_at)  # fmt: skip
    dropped = load_intent(session_factory, dropped_id)
    assert dropped.status == FAILED and "Bounced Address" in dropped.reject_reason
    reasons = {s.recipient: s.reason for s in suppression_map(session_factory).values()}
    assert reasons == {"example@test.com": "complaint", "dropped@test.com": "sendgrid-account"}
