"""SES semantics: account-level suppression, Send/Reject/Rendering Failure, delays, not-spam.

The payload shapes follow the SES Developer Guide ("Examples of event data that
Amazon SES publishes to Amazon SNS" and "Amazon SNS notification contents"),
reduced to the fields that matter; each is signed by the test SNS signer.
"""

from __future__ import annotations

import datetime as dt

import pytest

from console.ops.jobs.retention import prune
from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED
from tests.support.event_checks import (
    all_events,
    load_intent,
    make_intent,
    post_sns,
    suppression_map,
)
from tests.support.provider_fixtures import dispose, make_events_app, sns_now

MAIL_TIME = "2025-01-31T11:59:58.000Z"
SNS_TIME = "the SNS message's own Timestamp"  # fresh: SNS messages over an hour old are refused


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url)
    yield app.test_client()
    dispose(app)


def mail(provider_id: str, *destination: str, timestamp: str | None = MAIL_TIME) -> dict:
    section = {
        "source": "noreply@outbox.localhost",
        "messageId": provider_id,
        "destination": list(destination or ["ada@example.com"]),
        "headersTruncated": False,
    }
    if timestamp:
        section["timestamp"] = timestamp
    return section


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


# SES Developer Guide, "Amazon SNS notification contents": a bounce of subtype
# OnAccountSuppressionList ("Amazon SES did not send the message ...").
def account_suppressed_bounce(provider_id: str) -> dict:
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "OnAccountSuppressionList",
            "bouncedRecipients": [
                {
                    "emailAddress": "ada@example.com",
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "Amazon SES did not send the message to this address "
                    "because it is on the suppression list for your account.",
                }
            ],
            "timestamp": "2025-01-31T12:00:01.000Z",
            "feedbackId": "0100-account-suppression",
            "reportingMTA": "dns; amazonses.com",
        },
        "mail": mail(provider_id),
    }


def test_account_suppression_bounce_marks_the_intent_not_sent(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-acct-1")
    post_sns(client, account_suppressed_bounce("ses-acct-1"))
    intent = load_intent(session_factory, intent_id)
    assert intent.status == FAILED
    assert "account-level suppression list" in intent.status_reason
    assert intent.rejected_at == at("2025-01-31T12:00:01.000Z")
    assert "account-level suppression list" in intent.reject_reason
    assert intent.bounced_at is None, "SES did not try: not a bounce for the sender rates"
    [entry] = suppression_map(session_factory).values()
    assert (entry.recipient, entry.reason) == ("ada@example.com", "ses-account")
    [event] = all_events(session_factory)
    assert (event.event_type, event.subtype) == ("rejected", "OnAccountSuppressionList")


# SES Developer Guide, "Complaint object": complaintSubType OnAccountSuppressionList means SES
# accepted the message but did not send it; here without complainedRecipients.
def test_account_suppression_complaint_without_recipients(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS, provider_id="ses-acct-2")
    notification = {
        "notificationType": "Complaint",
        "complaint": {
            "complaintSubType": "OnAccountSuppressionList",
            "complainedRecipients": [],
            "timestamp": "2025-01-31T12:00:02.000Z",
            "feedbackId": "0100-account-complaint",
        },
        "mail": mail("ses-acct-2", "ada@example.com"),
    }
    post_sns(client, notification)
    intent = load_intent(session_factory, intent_id)
    assert intent.status == FAILED and intent.complained_at is None
    assert "account-level suppression list" in intent.status_reason
    assert intent.rejected_at == at("2025-01-31T12:00:02.000Z")
    [entry] = suppression_map(session_factory).values()
    assert (entry.recipient, entry.reason) == ("ada@example.com", "ses-account")
    [event] = all_events(session_factory)
    assert (event.recipient, event.intent_id) == ("ada@example.com", intent_id)


# SES Developer Guide, "Send event record": an empty "send" object.
def test_send_settles_an_ambiguous_intent_as_accepted(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS, provider_id="ses-send-1")
    post_sns(client, {"eventType": "Send", "mail": mail("ses-send-1"), "send": {}})
    intent = load_intent(session_factory, intent_id)
    assert intent.status == SUBMITTED
    [event] = all_events(session_factory)
    assert event.event_type == "accepted" and event.occurred_at == at(MAIL_TIME)
    assert suppression_map(session_factory) == {}


# SES Developer Guide, "Reject event record" ({"reason": "Bad content"}) and
# "Rendering Failure event record" ({"errorMessage", "templateName"}).
REJECTIONS = {
    "reject": ({"eventType": "Reject", "reject": {"reason": "Bad content"}}, "Bad content"),
    "rendering failure": (
        {
            "eventType": "Rendering Failure",
            "failure": {
                "errorMessage": "Attribute 'attributeName' is not present in the rendering data.",
                "templateName": "MyTemplate",
            },
        },
        "Attribute 'attributeName' is not present in the rendering data.",
    ),
}


@pytest.mark.parametrize("kind", REJECTIONS, ids=list(REJECTIONS))
@pytest.mark.parametrize("status", [AMBIGUOUS, SUBMITTED])
def test_reject_and_rendering_failure_settle_as_failed_and_keep_the_reason(
    client, session_factory, kind, status
):
    notification, reason = REJECTIONS[kind]
    intent_id = make_intent(session_factory, status=status, provider_id="ses-rej-1")
    post_sns(client, {**notification, "mail": mail("ses-rej-1")})
    prune(session_factory, retention_days=1, now=dt.datetime(2099, 1, 1, tzinfo=dt.UTC))
    [event] = all_events(session_factory)
    assert event.payload is None, "retention cleared the raw payload"
    intent = load_intent(session_factory, intent_id)
    assert intent.status == FAILED
    assert reason in intent.reject_reason and reason in intent.status_reason
    assert reason in event.diagnostic
    assert intent.rejected_at == at(MAIL_TIME)
    assert suppression_map(session_factory) == {}


# SES Developer Guide, "DeliveryDelay event record".
def test_delivery_delay_is_a_fact_that_never_suppresses(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-delay-1")
    post_sns(
        client,
        {
            "eventType": "DeliveryDelay",
            "mail": mail("ses-delay-1"),
            "deliveryDelay": {
                "timestamp": "2025-01-31T12:25:40.095Z",
                "delayType": "TransientCommunicationFailure",
                "expirationTime": "2025-01-31T18:25:40.914Z",
                "delayedRecipients": [
                    {
                        "emailAddress": "ada@example.com",
                        "status": "4.4.1",
                        "diagnosticCode": "smtp; 421 4.4.1 Unable to connect to remote host",
                    }
                ],
            },
        },
    )
    intent = load_intent(session_factory, intent_id)
    assert intent.delayed_at == at("2025-01-31T12:25:40.095Z")
    assert "TransientCommunicationFailure" in intent.delay_reason
    assert "421 4.4.1" in intent.delay_reason
    assert intent.status == SUBMITTED and intent.bounced_at is None
    assert suppression_map(session_factory) == {}


def test_not_spam_is_recorded_and_never_suppresses(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-ns-1")
    post_sns(
        client,
        {
            "notificationType": "Complaint",
            "complaint": {
                "complainedRecipients": [{"emailAddress": "ada@example.com"}],
                "complaintFeedbackType": "not-spam",
                "timestamp": "2025-01-31T12:10:00.000Z",
                "feedbackId": "0100-not-spam",
            },
            "mail": mail("ses-ns-1"),
        },
    )
    [event] = all_events(session_factory)
    assert (event.event_type, event.subtype, event.intent_id) == ("not_spam", "not-spam", intent_id)
    assert load_intent(session_factory, intent_id).complained_at is None
    assert suppression_map(session_factory) == {}


# In a Permanent bounce only recipients with a 5.x.x status (or none) are suppressed.
def test_permanent_bounce_suppresses_only_5xx_recipients(client, session_factory):
    notification = {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": "Permanent",
            "bounceSubType": "General",
            "bouncedRecipients": [
                {"emailAddress": "ada@example.com", "action": "failed", "status": "5.1.1"},
                {"emailAddress": "bob@example.com", "action": "delayed", "status": "4.4.7"},
                {"emailAddress": "cy@example.com"},
            ],
            "timestamp": "2025-01-31T12:00:05.000Z",
        },
        "mail": mail("ses-mix-1", "ada@example.com", "bob@example.com", "cy@example.com"),
    }
    post_sns(client, notification)
    by_recipient = {e.recipient: e.bounce_type for e in all_events(session_factory)}
    assert by_recipient == {
        "ada@example.com": "permanent",
        "bob@example.com": "transient",
        "cy@example.com": "permanent",
    }
    assert set(suppression_map(session_factory)) == {"ada@example.com", "cy@example.com"}


@pytest.mark.parametrize(
    "bounce_time, mail_time, expected",
    [
        ("2025-01-31T12:00:05.000Z", MAIL_TIME, "2025-01-31T12:00:05.000Z"),
        (None, MAIL_TIME, MAIL_TIME),
        (None, None, SNS_TIME),
    ],
    ids=["own timestamp", "mail timestamp", "sns timestamp"],
)
def test_event_time_is_never_the_arrival_time(
    client, session_factory, bounce_time, mail_time, expected
):
    intent_id = make_intent(session_factory, provider_id="ses-time-1")
    bounce = {
        "bounceType": "Transient",
        "bounceSubType": "MailboxFull",
        "bouncedRecipients": [{"emailAddress": "ada@example.com", "status": "4.2.2"}],
    }
    if bounce_time:
        bounce["timestamp"] = bounce_time
    notification = {
        "notificationType": "Bounce",
        "bounce": bounce,
        "mail": mail("ses-time-1", timestamp=mail_time),
    }
    sns_time = sns_now()
    post_sns(client, notification, timestamp=sns_time)
    expected = sns_time if expected == SNS_TIME else expected
    [event] = all_events(session_factory)
    assert event.occurred_at == at(expected)
    assert load_intent(session_factory, intent_id).bounced_at == at(expected)


def test_an_empty_recipient_list_keeps_type_subtype_and_time(client, session_factory):
    two_recipients = mail("ses-empty-1", "ada@example.com", "bob@example.com")
    post_sns(
        client,
        {
            "notificationType": "Bounce",
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [],
                "timestamp": "2025-01-31T12:00:05.000Z",
            },
            "mail": two_recipients,
        },
    )
    post_sns(
        client,
        {
            "notificationType": "Complaint",
            "complaint": {
                "complainedRecipients": [],
                "complaintFeedbackType": "abuse",
                "timestamp": "2025-01-31T12:10:00.000Z",
            },
            "mail": two_recipients,
        },
    )
    bounced, complained = all_events(session_factory)
    assert (bounced.event_type, bounced.bounce_type, bounced.subtype) == (
        "bounced",
        "permanent",
        "General",
    )
    assert bounced.occurred_at == at("2025-01-31T12:00:05.000Z") and bounced.recipient is None
    assert (complained.event_type, complained.subtype) == ("complained", "abuse")
    assert complained.occurred_at == at("2025-01-31T12:10:00.000Z")
    assert suppression_map(session_factory) == {}, "no recipient named: nobody is suppressed"
