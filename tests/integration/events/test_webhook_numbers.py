"""A signed payload holding NaN, Infinity or a number too large for a float (1e999) is refused
the same way on SQLite and PostgreSQL, and nothing of it is stored."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from console.events import mailgun, resend, sendgrid, webhook
from tests.support import native_payloads as payloads
from tests.support.event_checks import all_events
from tests.support.native_signers import (
    MAILGUN_KEY,
    RESEND_SECRET,
    native_settings,
    now,
    postmark_headers,
    sendgrid_key,
)
from tests.support.provider_fixtures import (
    WEBHOOK_SECRET,
    delivery,
    dispose,
    make_events_app,
    sns_signer,
)

NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
PLACEHOLDER = '"__NUMBER__"'


@pytest.fixture
def app(db_url):
    made, _ = make_events_app(db_url, **native_settings())
    yield made
    dispose(made)


def with_number(data, number: str) -> bytes:
    return json.dumps(data).replace(PLACEHOLDER, number).encode()


def generic(number: str):
    event = {"id": "evt-n", "type": "delivered", "provider_message_id": "p-1"}
    body = with_number({**event, "score": "__NUMBER__"}, number)
    timestamp = now()
    signature = webhook.compute_signature(WEBHOOK_SECRET, timestamp, body)
    headers = {webhook.TIMESTAMP_HEADER: timestamp, webhook.SIGNATURE_HEADER: signature}
    return "/webhooks/generic", body, headers


def resend_request(number: str):
    event = payloads.resend("email.delivered")
    event["data"]["score"] = "__NUMBER__"
    body, svix_id, timestamp = with_number(event, number), f"msg_{uuid.uuid4().hex}", now()
    signature = resend.sign(RESEND_SECRET, svix_id, timestamp, body)
    headers = {"svix-id": svix_id, "svix-timestamp": timestamp, "svix-signature": f"v1,{signature}"}
    return "/webhooks/resend", body, headers


def postmark_request(number: str):
    record = {**payloads.postmark("delivery"), "Score": "__NUMBER__"}
    return "/webhooks/postmark", with_number(record, number), postmark_headers()


def mailgun_request(number: str):
    event = {**payloads.mailgun("delivered"), "score": "__NUMBER__"}
    timestamp, token = now(), uuid.uuid4().hex * 2
    block = {"timestamp": timestamp, "token": token,
             "signature": mailgun.compute_signature(MAILGUN_KEY, timestamp, token)}  # fmt: skip
    body = with_number({"signature": block, "event-data": event}, number)
    return "/webhooks/mailgun", body, {"Content-Type": "application/json"}


def sendgrid_request(number: str):
    event = {**payloads.sendgrid_batch()[0], "timestamp": "__NUMBER__"}
    body, timestamp = with_number([event], number), now()
    der = sendgrid_key().sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    headers = {sendgrid.SIGNATURE_HEADER: base64.b64encode(der).decode(),
               sendgrid.TIMESTAMP_HEADER: timestamp}  # fmt: skip
    return "/webhooks/sendgrid", body, headers


def ses_request(number: str):
    ses_message = json.dumps(delivery("ses-n", "ada@example.com")).replace(
        '"processingTimeMillis": 812', f'"processingTimeMillis": {number}'
    )
    assert number in ses_message
    body = json.dumps(sns_signer().notification(ses_message)).encode()
    return "/webhooks/ses", body, {}


REQUESTS = {
    "generic": (generic, 400),
    "resend": (resend_request, 400),
    "postmark": (postmark_request, 400),
    "mailgun": (mailgun_request, mailgun.NOT_ACCEPTABLE),  # Mailgun retries any other refusal
    "sendgrid": (sendgrid_request, 400),
    "ses": (ses_request, 400),
}


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("provider", REQUESTS)
def test_a_non_finite_number_is_refused_and_nothing_is_stored(
    app, session_factory, provider, number
):
    build, refused = REQUESTS[provider]
    path, body, headers = build(number)
    answer = app.test_client().post(path, data=body, headers=headers)
    assert answer.status_code == refused, answer.get_json()
    assert all_events(session_factory) == []


@pytest.mark.parametrize("provider", REQUESTS)
def test_a_finite_number_in_the_same_place_is_recorded(app, session_factory, provider):
    path, body, headers = REQUESTS[provider][0]("1.5e3")
    answer = app.test_client().post(path, data=body, headers=headers)
    assert answer.status_code == 200, answer.get_json()
    assert len(all_events(session_factory)) >= 1
