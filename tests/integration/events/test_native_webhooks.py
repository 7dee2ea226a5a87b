"""Native webhooks: each provider's own verification; forged or replayed requests change nothing."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import select

from console.models import ProviderEvent, Suppression
from console.web.extensions import db
from tests.support import native_payloads as payloads
from tests.support.native_signers import (
    mailgun_body,
    native_settings,
    postmark_headers,
    resend_request,
    sendgrid_request,
)
from tests.support.provider_fixtures import dispose, make_events_app

STALE = str(int(time.time()) - 3600)
MAILGUN_STALE = str(int(time.time()) - 9 * 3600)  # Mailgun's window covers its 8 h of retries


@pytest.fixture
def app_on_both(db_url):
    app, _ = make_events_app(db_url, **native_settings())
    yield app
    dispose(app)


@pytest.fixture
def app(sqlite_url):
    app, _ = make_events_app(sqlite_url, **native_settings())
    yield app
    dispose(app)


def count(app) -> int:
    return len(events_of(app))


def events_of(app) -> list[ProviderEvent]:
    with app.app_context():
        query = select(ProviderEvent).order_by(ProviderEvent.id)
        return list(db.session.scalars(query))


def suppressions_of(app) -> list[Suppression]:
    with app.app_context():
        return list(db.session.scalars(select(Suppression)))


# --- Resend -----------------------------------------------------------------------------------


def post_resend(app, body, headers):
    return app.test_client().post("/webhooks/resend", data=body, headers=headers)


def test_resend_signed_event_is_recorded_once_and_a_replay_is_refused(app_on_both):
    body, headers = resend_request(payloads.resend("bounced-hard"), svix_id="msg_hard_1")
    first = post_resend(app_on_both, body, headers)
    assert (first.status_code, first.get_json()["inserted"]) == (200, 1)
    replay = post_resend(app_on_both, body, headers)
    assert replay.status_code == 409
    later = str(int(time.time()) - 5)  # Svix signs every retry anew, with its own time
    retry = resend_request(payloads.resend("bounced-hard"), svix_id="msg_hard_1", timestamp=later)
    retried = post_resend(app_on_both, *retry)
    assert (retried.status_code, retried.get_json()["duplicates"]) == (200, 1)
    assert count(app_on_both) == 1


def forged_resend(kind):
    event = payloads.resend("email.delivered")
    body, headers = resend_request(event, svix_id="msg_forged")
    if kind == "wrong secret":
        return resend_request(event, svix_id="msg_forged", secret="whsec_" + "QUJD" * 8)
    if kind == "tampered body":
        return body.replace(b"delivered@", b"Delivered@"), headers
    if kind == "other id":
        return body, {**headers, "svix-id": "msg_other"}
    if kind == "stale":
        return resend_request(event, svix_id="msg_forged", timestamp=STALE)
    if kind == "no signature":
        return body, {k: v for k, v in headers.items() if k != "svix-signature"}
    if kind == "v2 only":
        return body, {**headers, "svix-signature": headers["svix-signature"].replace("v1,", "v2,")}
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["wrong secret", "tampered body", "other id", "stale", "no signature", "v2 only"]
)
def test_resend_forged_requests_are_refused(app, kind):
    response = post_resend(app, *forged_resend(kind))
    assert response.status_code == 401, response.get_json()
    assert count(app) == 0


def test_resend_accepts_any_of_several_signatures(app):
    body, headers = resend_request(payloads.resend("email.delivered"), svix_id="msg_rotated")
    rotated = f"v1,{base64.b64encode(b'x' * 32).decode()} {headers['svix-signature']}"
    response = post_resend(app, body, {**headers, "svix-signature": rotated})
    assert response.status_code == 200 and count(app) == 1


# --- Postmark ---------------------------------------------------------------------------------


def post_postmark(app, record, headers=None):
    body = record if isinstance(record, bytes) else json.dumps(record).encode()
    return app.test_client().post(
        "/webhooks/postmark", data=body, headers=headers or postmark_headers()
    )


def test_postmark_record_is_recorded_once(app_on_both):
    first = post_postmark(app_on_both, payloads.postmark("hard_bounce"))
    assert (first.status_code, first.get_json()["inserted"]) == (200, 1)
    again = post_postmark(app_on_both, payloads.postmark("hard_bounce"))
    assert again.status_code == 409, "Postmark signs nothing: a repeated record is refused"
    assert count(app_on_both) == 1
    [event] = events_of(app_on_both)
    assert "Content" not in event.payload, "the bounce dump is not kept"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        postmark_headers(password="wrong"),
        postmark_headers(user="someone"),
        {"Authorization": "Basic !!!"},
        {"Authorization": "Bearer pm-pass-8c1e"},
    ],
    ids=["none", "wrong password", "wrong user", "not base64", "not basic"],
)
def test_postmark_without_the_credentials_is_refused(app, headers):
    response = post_postmark(app, payloads.postmark("hard_bounce"), headers=headers or {"X": "1"})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Basic")
    assert count(app) == 0


def test_postmark_inbound_message_is_refused_and_not_stored(app):
    response = post_postmark(app, payloads.postmark("inbound"))
    assert response.status_code == 400 and "inbound" in response.get_json()["error"]
    assert count(app) == 0


# --- Mailgun ----------------------------------------------------------------------------------


def post_mailgun(app, body):
    return app.test_client().post(
        "/webhooks/mailgun", data=body, headers={"Content-Type": "application/json"}
    )


def test_mailgun_signed_event_is_recorded_and_its_token_cannot_be_used_again(app_on_both):
    body = mailgun_body(payloads.mailgun("delivered"), token="651869375b9df3c98fc15c4889b1021")
    assert post_mailgun(app_on_both, body).status_code == 200
    assert post_mailgun(app_on_both, body).status_code == 406  # not retried by Mailgun
    other = payloads.mailgun("failed_permanent")
    reused = mailgun_body(other, token="651869375b9df3c98fc15c4889b1021")
    assert post_mailgun(app_on_both, reused).status_code == 406, "a used token is a replay"
    assert count(app_on_both) == 1


def forged_mailgun(kind):
    event = payloads.mailgun("delivered")
    if kind == "wrong key":
        return mailgun_body(event, key="key-someone-else", token="t" * 50)
    if kind == "stale":
        return mailgun_body(event, token="t" * 50, timestamp=MAILGUN_STALE)
    body = mailgun_body(event, token="t" * 50)
    if kind == "tampered event":
        return body.replace(b"recipient@example.com", b"attacker@example.com")
    if kind == "no signature":
        data = json.loads(body)
        del data["signature"]
        return json.dumps(data).encode()
    if kind == "form encoded":
        return b"timestamp=1&token=t&signature=s&event=delivered"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind, status",
    [
        ("wrong key", 401),
        ("stale", 401),
        ("tampered event", 200),
        ("no signature", 401),
        ("form encoded", 406),  # Mailgun's legacy webhooks: 406 stops its retries
    ],  # fmt: skip
)
def test_mailgun_forged_requests_are_refused(app, kind, status):
    response = post_mailgun(app, forged_mailgun(kind))
    if kind == "tampered event":
        # Mailgun signs only timestamp + token: a changed event-data still verifies, so the
        # token is what makes it one delivery only (see the replay test above)
        assert response.status_code == status
        return
    assert response.status_code == status, response.get_json()
    assert count(app) == 0


# --- SendGrid ---------------------------------------------------------------------------------


def post_sendgrid(app, body, headers):
    return app.test_client().post("/webhooks/sendgrid", data=body, headers=headers)


def test_sendgrid_batch_is_recorded_event_by_event_and_a_replay_is_refused(app_on_both):
    body, headers = sendgrid_request(payloads.sendgrid_batch())
    first = post_sendgrid(app_on_both, body, headers)
    assert (first.status_code, first.get_json()["inserted"]) == (200, 7)
    assert post_sendgrid(app_on_both, body, headers).status_code == 409
    later = str(int(headers["X-Twilio-Email-Event-Webhook-Timestamp"]) + 1)  # signed anew
    resent = post_sendgrid(
        app_on_both, *sendgrid_request(payloads.sendgrid_batch(), timestamp=later)
    )
    assert (resent.status_code, resent.get_json()["duplicates"]) == (200, 7)
    assert count(app_on_both) == 7


def test_sendgrid_same_event_twice_in_one_batch_is_recorded_once(app):
    batch = payloads.sendgrid_batch()[:2]
    response = post_sendgrid(app, *sendgrid_request(batch + batch))
    assert response.get_json() == {"status": "recorded", "inserted": 2, "duplicates": 2,
                                   "matched": 0}  # fmt: skip


def forged_sendgrid(kind):
    batch = payloads.sendgrid_batch()
    body, headers = sendgrid_request(batch)
    if kind == "other key":
        return sendgrid_request(batch, key=ec.generate_private_key(ec.SECP256R1()))
    if kind == "tampered body":
        return body.replace(b"example@test.com", b"examplf@test.com"), headers
    if kind == "other timestamp":
        return body, {
            **headers,
            "X-Twilio-Email-Event-Webhook-Timestamp": str(int(time.time()) - 1),
        }
    if kind == "stale":
        return sendgrid_request(batch, timestamp=STALE)
    if kind == "no signature":
        return body, {k: v for k, v in headers.items() if "Signature" not in k}
    if kind == "garbage signature":
        return body, {**headers, "X-Twilio-Email-Event-Webhook-Signature": "bm90IGEgc2ln"}
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["other key", "tampered body", "other timestamp", "stale", "no signature", "garbage signature"],
)
def test_sendgrid_forged_requests_are_refused(app, kind):
    response = post_sendgrid(app, *forged_sendgrid(kind))
    assert response.status_code == 401, response.get_json()
    assert count(app) == 0


# --- all --------------------------------------------------------------------------------------

ENDPOINTS = {
    "resend": "CONSOLE_RESEND_WEBHOOK_SECRET",
    "postmark": "CONSOLE_POSTMARK_WEBHOOK_PASSWORD",
    "mailgun": "CONSOLE_MAILGUN_SIGNING_KEY",
    "sendgrid": "CONSOLE_SENDGRID_PUBLIC_KEY",
}


@pytest.mark.parametrize("provider", ENDPOINTS)
def test_an_endpoint_without_its_secret_answers_503(sqlite_url, provider):
    app, _ = make_events_app(sqlite_url, **{**native_settings(), ENDPOINTS[provider]: ""})
    try:
        response = app.test_client().post(f"/webhooks/{provider}", data=b"{}")
        assert response.status_code == 503
        assert ENDPOINTS[provider] in response.get_json()["error"]
        assert suppressions_of(app) == [] and count(app) == 0
    finally:
        dispose(app)
