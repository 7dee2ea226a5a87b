"""Text no database stores (a lone surrogate, a NUL) in a signed webhook body: a 4xx, nothing
stored; on SQLite and on PostgreSQL, for every provider."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from console.models import Intent, ProviderEvent, Suppression
from console.web.extensions import db
from tests.support import native_payloads as payloads
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    now,
    postmark_headers,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import (
    TOPIC_ARN,
    bounce,
    dispose,
    make_events_app,
    sns_signer,
)

SURROGATE = "\ud800@x.com"


@pytest.fixture
def served(db_url):
    """The app as a server runs it: a failure is answered (500), not raised into the test."""
    app, _ = make_events_app(db_url, TESTING=False, **native_settings())
    yield app
    dispose(app)


def stored(app) -> list[int]:
    with app.app_context():
        tables = (ProviderEvent, Suppression, Intent)
        return [db.session.scalar(select(func.count()).select_from(t)) for t in tables]


def resend_post(client, edit):
    event = payloads.resend("email.delivered")
    edit(event["data"])
    body, headers = resend_request(event, svix_id="msg_text_1")
    return client.post("/webhooks/resend", data=body, headers=headers)


def postmark_post(client, edit):
    record = payloads.postmark("hard_bounce")
    edit(record)
    return client.post("/webhooks/postmark", data=json.dumps(record), headers=postmark_headers())


def mailgun_post(client, edit):
    event = payloads.mailgun("failed_permanent")
    edit(event)
    return client.post("/webhooks/mailgun", data=mailgun_body(event, token="t" * 50))


def sendgrid_post(client, edit):
    batch = payloads.sendgrid_batch()
    edit(batch[3])  # the bounce
    body, headers = sendgrid_request(batch)
    return client.post("/webhooks/sendgrid", data=body, headers=headers)


def ses_post(client, edit):
    notification = bounce("0100-ses-text", "Permanent", "ada@example.com")
    edit(notification)
    message = sns_signer().notification(notification, topic=TOPIC_ARN)
    return client.post("/webhooks/ses", data=json.dumps(message))


def put(path: str, value):
    """An edit that sets `value` at the dotted `path` of a payload."""

    def edit(payload):
        *parents, last = path.split(".")
        for name in parents:
            payload = payload[int(name)] if isinstance(payload, list) else payload[name]
        payload[last] = value

    return edit


CASES = [
    ("resend", resend_post, put("to", [SURROGATE]), 400),
    ("resend", resend_post, put("email_id", "id-\ud800"), 400),
    ("resend", resend_post, put("subject", "Hi\x00"), 400),
    ("postmark", postmark_post, put("Email", SURROGATE), 403),
    ("postmark", postmark_post, put("Details", "smtp; 550 \udfff"), 403),
    ("postmark", postmark_post, put("MessageID", "pm\x00id"), 403),
    ("mailgun", mailgun_post, put("recipient", SURROGATE), 406),
    ("mailgun", mailgun_post, put("delivery-status.message", "no \ud800"), 406),
    ("mailgun", mailgun_post, put("id", "evt\x00"), 406),
    ("sendgrid", sendgrid_post, put("email", SURROGATE), 400),
    ("sendgrid", sendgrid_post, put("reason", "500 \ud800"), 400),
    ("sendgrid", sendgrid_post, put("sg_event_id", "sg\x00"), 400),
    ("ses", ses_post, put("bounce.bouncedRecipients.0.emailAddress", SURROGATE), 400),
    ("ses", ses_post, put("mail.commonHeaders.subject", "Your code \ud800"), 400),
    ("ses", ses_post, put("mail.messageId", "ses\x00id"), 400),
]


@pytest.mark.parametrize(
    "provider,post,edit,status", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_unstorable_text_in_a_signed_body_is_refused_and_nothing_stored(
    served, provider, post, edit, status
):
    response = post(served.test_client(), edit)
    assert response.status_code == status, (provider, response.status_code)
    assert "NUL" in response.json["error"] or "surrogate" in response.json["error"]
    assert stored(served) == [0, 0, 0]


def test_a_surrogate_in_the_mailgun_signature_block_is_refused(served):
    block = {"timestamp": now(), "token": "tok-\ud800", "signature": "0" * 64}
    body = json.dumps({"signature": block, "event-data": payloads.mailgun("delivered")})
    response = served.test_client().post("/webhooks/mailgun", data=body)
    assert response.status_code == 406
    assert stored(served) == [0, 0, 0]


def test_a_surrogate_in_an_sns_message_is_refused_before_its_signature_is_checked(served):
    message = sns_signer().notification({"notificationType": "Delivery"})
    message["Subject"] = "Amazon SES \ud800"
    response = served.test_client().post("/webhooks/ses", data=json.dumps(message))
    assert response.status_code == 400
    assert stored(served) == [0, 0, 0]


@pytest.mark.parametrize(
    "post", [resend_post, postmark_post, mailgun_post, sendgrid_post, ses_post]
)
def test_the_same_bodies_without_the_bad_text_are_recorded(served, post):
    response = post(served.test_client(), lambda payload: None)
    assert response.status_code == 200, response.json
    assert stored(served)[0] >= 1
