"""The native verifiers against the providers' own published test vectors, clocks pinned."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from console.config import ConfigError, load_enqueue_settings
from console.events import EventRejected, mailgun, postmark, resend, sendgrid
from tests.support.native_payloads import SENDGRID_VECTOR, SVIX_VECTOR


def verify_svix(**changes):
    arguments = {
        "secret": SVIX_VECTOR["secret"],
        "message_id": SVIX_VECTOR["id"],
        "timestamp": SVIX_VECTOR["timestamp"],
        "signature": SVIX_VECTOR["signature"],
        "body": SVIX_VECTOR["body"],
        "now_epoch_seconds": int(SVIX_VECTOR["timestamp"]) + 10,
        "tolerance_seconds": 300,
        **changes,
    }
    resend.verify(**arguments)


def test_svix_published_vector_verifies():
    verify_svix()
    verify_svix(signature=f"v1,bm90IHRoaXM= {SVIX_VECTOR['signature']} v2,whatever")


@pytest.mark.parametrize(
    "changes",
    [
        {"body": b'{"test": 2432232315}'},
        {"message_id": "msg_other"},
        {"timestamp": "1614265331", "now_epoch_seconds": 1614265331},
        {"now_epoch_seconds": 1614265330 + 301},
        {"signature": SVIX_VECTOR["signature"].replace("v1,", "v2,")},
        {"secret": "whsec_" + base64.b64encode(b"other").decode()},
    ],
    ids=["body", "id", "timestamp", "too late", "unknown version", "other secret"],
)
def test_svix_vector_with_one_change_is_refused(changes):
    with pytest.raises(EventRejected) as refused:
        verify_svix(**changes)
    assert refused.value.status == 401


def verify_sendgrid(**changes):
    arguments = {
        "public_key": SENDGRID_VECTOR["public_key"],
        "signature": SENDGRID_VECTOR["signature"],
        "timestamp": SENDGRID_VECTOR["timestamp"],
        "body": SENDGRID_VECTOR["body"],
        "now_epoch_seconds": int(SENDGRID_VECTOR["timestamp"]) + 5,
        "tolerance_seconds": 300,
        **changes,
    }
    sendgrid.verify(**arguments)


def test_sendgrid_published_vector_verifies_and_parses():
    verify_sendgrid()
    [event] = sendgrid.parse_batch(SENDGRID_VECTOR["body"])
    assert (event.event_type, event.recipient) == ("rejected", "hello@world.com")
    assert event.provider_message_id == "LRzXl_NHStOGhQ4kofSm_A"
    assert event.suppress_as == "sendgrid-account"


@pytest.mark.parametrize(
    "changes",
    [
        {"body": SENDGRID_VECTOR["body"].replace(b"hello@", b"hellp@")},
        {"body": SENDGRID_VECTOR["body"].rstrip()},
        {"timestamp": "1600112503"},
        {"now_epoch_seconds": 1600112502 + 301},
        {"signature": "bm90IGEgc2lnbmF0dXJl"},
        {"signature": "%%%"},
    ],
    ids=["body", "no crlf", "timestamp", "too late", "not der", "not base64"],
)
def test_sendgrid_vector_with_one_change_is_refused(changes):
    with pytest.raises(EventRejected) as refused:
        verify_sendgrid(**changes)
    assert refused.value.status == 401


def test_sendgrid_key_may_be_pem():
    der = base64.b64decode(SENDGRID_VECTOR["public_key"])
    pem = serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    verify_sendgrid(public_key=pem.decode())


def test_mailgun_signature_is_hmac_of_timestamp_and_token():
    # Mailgun's "Securing webhooks": hex HMAC-SHA256(signing key, timestamp + token)
    expected = hmac.new(b"key", b"1534108637t0k3n", hashlib.sha256).hexdigest()
    assert mailgun.compute_signature("key", "1534108637", "t0k3n") == expected
    block = {"timestamp": "1534108637", "token": "t0k3n", "signature": expected.upper()}
    token = mailgun.verify(
        {"signature": block}, signing_key="key", now_epoch_seconds=1534108640, tolerance_seconds=300
    )
    assert token == "t0k3n"
    with pytest.raises(EventRejected):
        mailgun.verify(
            {"signature": block}, signing_key="other", now_epoch_seconds=1534108640,
            tolerance_seconds=300,
        )  # fmt: skip


def test_postmark_credentials_are_compared_whole():
    good = "Basic " + base64.b64encode(b"hook:secret").decode()
    postmark.check_credentials(good, user="hook", password="secret")
    for given in (b"hook:secret2", b"hook:secre", b"hook2:secret", b"hooksecret", b":secret"):
        header = "Basic " + base64.b64encode(given).decode()
        with pytest.raises(EventRejected):
            postmark.check_credentials(header, user="hook", password="secret")


def test_bad_native_keys_stop_the_console_at_start_up():
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    der = p384.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    bad = {
        "CONSOLE_RESEND_WEBHOOK_SECRET": "whsec_not base64!",
        "CONSOLE_SENDGRID_PUBLIC_KEY": base64.b64encode(der).decode(),
    }
    for name, value in bad.items():
        with pytest.raises(ConfigError, match=name):
            load_enqueue_settings({name: value})
    settings = load_enqueue_settings(
        {
            "CONSOLE_RESEND_WEBHOOK_SECRET": SVIX_VECTOR["secret"],
            "CONSOLE_SENDGRID_PUBLIC_KEY": SENDGRID_VECTOR["public_key"],
        }  # fmt: skip
    )
    assert settings.resend_webhook_secret == SVIX_VECTOR["secret"]
