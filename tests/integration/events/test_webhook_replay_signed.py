"""A signed request is a replay by what was signed, never by the bytes of its signature.

An ECDSA signature (r, s) has a twin (r, n - s) that verifies just as well, an
HMAC's hex may be written in capitals, and a Svix header may list one signature
or several: none of these makes an old request new.
"""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from console.events import sendgrid, webhook
from tests.support import native_payloads as payloads
from tests.support.event_checks import all_events
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    now,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app

P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@pytest.fixture
def app(db_url):
    made, _ = make_events_app(db_url, **native_settings())
    yield made
    dispose(made)


def malleated(signature_b64: str) -> str:
    """The other valid ECDSA signature of the same message: (r, n - s)."""
    r, s = decode_dss_signature(base64.b64decode(signature_b64))
    return base64.b64encode(encode_dss_signature(r, P256_ORDER - s)).decode()


def test_a_sendgrid_request_with_its_signature_malleated_is_a_replay(app, session_factory):
    body, headers = sendgrid_request(payloads.sendgrid_batch()[:1])
    client = app.test_client()
    assert client.post("/webhooks/sendgrid", data=body, headers=headers).status_code == 200
    twin = {**headers, sendgrid.SIGNATURE_HEADER: malleated(headers[sendgrid.SIGNATURE_HEADER])}
    assert twin[sendgrid.SIGNATURE_HEADER] != headers[sendgrid.SIGNATURE_HEADER]
    answer = client.post("/webhooks/sendgrid", data=body, headers=twin)
    assert answer.status_code == 409, answer.get_json()
    assert len(all_events(session_factory)) == 1


def test_a_sendgrid_request_signed_again_with_the_same_time_is_a_replay(app):
    events = payloads.sendgrid_batch()[:1]
    timestamp = now()
    client = app.test_client()
    body, first = sendgrid_request(events, timestamp=timestamp)
    assert client.post("/webhooks/sendgrid", data=body, headers=first).status_code == 200
    body, second = sendgrid_request(events, timestamp=timestamp)  # ECDSA: a new random k
    assert second[sendgrid.SIGNATURE_HEADER] != first[sendgrid.SIGNATURE_HEADER]
    assert client.post("/webhooks/sendgrid", data=body, headers=second).status_code == 409


def test_a_resend_request_with_its_signatures_listed_again_is_a_replay(app):
    body, headers = resend_request(payloads.resend("email.delivered"), svix_id="msg_twice")
    client = app.test_client()
    assert client.post("/webhooks/resend", data=body, headers=headers).status_code == 200
    listed = {**headers, "svix-signature": f"v1,AAAA {headers['svix-signature']}"}
    assert client.post("/webhooks/resend", data=body, headers=listed).status_code == 409


def test_a_mailgun_request_with_its_signature_in_capitals_is_a_replay(app):
    body = mailgun_body(payloads.mailgun("delivered"), token="c" * 50)
    data = json.loads(body)
    data["signature"]["signature"] = data["signature"]["signature"].upper()
    client = app.test_client()
    headers = {"Content-Type": "application/json"}
    assert client.post("/webhooks/mailgun", data=body, headers=headers).status_code == 200
    again = client.post("/webhooks/mailgun", data=json.dumps(data), headers=headers)
    assert again.status_code in (401, 406)


def test_a_generic_request_with_its_signature_in_capitals_is_a_replay(app, session_factory):
    body = json.dumps(
        {"id": "evt-caps", "type": "delivered", "provider_message_id": "p-1"}
    ).encode()
    timestamp = now()
    signature = webhook.compute_signature(WEBHOOK_SECRET, timestamp, body)
    client = app.test_client()
    for written in (signature, signature.upper()):
        headers = {webhook.TIMESTAMP_HEADER: timestamp, webhook.SIGNATURE_HEADER: written}
        status = client.post("/webhooks/generic", data=body, headers=headers).status_code
        assert status == (200 if written == signature else 409)
    assert len(all_events(session_factory)) == 1
