"""SNS signature verification at POST /webhooks/ses, with a locally generated CA and key."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from console.events import sns
from console.models import ProviderEvent
from console.web.extensions import db
from tests.support.provider_fixtures import (
    CERT_URL,
    FOREIGN_TOPIC_ARN,
    delivery,
    dispose,
    make_events_app,
    sns_signer,
)


@pytest.fixture
def events_app(sqlite_url):
    app, fetcher = make_events_app(sqlite_url)
    app.fetcher = fetcher
    yield app
    dispose(app)


def post(app, message) -> tuple[int, dict]:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    response = app.test_client().post(
        "/webhooks/ses", data=body, headers={"Content-Type": "text/plain; charset=UTF-8"}
    )
    return response.status_code, response.get_json(silent=True) or {}


def stored_events(app) -> int:
    with app.app_context():
        return db.session.execute(select(func.count()).select_from(ProviderEvent)).scalar_one()


@pytest.mark.parametrize("version", ["1", "2"])
def test_valid_signature_is_accepted_and_recorded(events_app, version):
    message = sns_signer().notification(delivery("ses-1", "ada@example.com"), version=version)
    status, body = post(events_app, message)
    assert (status, body["inserted"]) == (200, 1)
    assert events_app.fetcher.urls == [CERT_URL]
    assert stored_events(events_app) == 1


def test_certificate_is_fetched_once_and_cached(events_app):
    for n in range(3):
        message = sns_signer().notification(delivery(f"ses-{n}", "ada@example.com"))
        assert post(events_app, message)[0] == 200
    assert events_app.fetcher.urls == [CERT_URL]
    assert stored_events(events_app) == 3


def tampered(message):
    return {**message, "Message": message["Message"].replace("ada@", "eve@")}


def signed_with_wrong_key(message):
    return sns_signer().sign(dict(message), key=sns_signer().other_key)


def with_subject_added(message):
    return {**message, "Subject": "added after signing"}


@pytest.mark.parametrize(
    "spoil", [tampered, signed_with_wrong_key, with_subject_added], ids=lambda f: f.__name__
)
def test_bad_signature_is_refused_without_state_change(events_app, spoil):
    message = spoil(sns_signer().notification(delivery("ses-1", "ada@example.com")))
    status, body = post(events_app, message)
    assert status == 403, body
    assert "signature" in body["error"]
    assert stored_events(events_app) == 0


BAD_CERT_URLS = {
    "http": "http://sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.pem",
    "not pem": "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.crt",
    "suffix host": "https://sns.x.amazonaws.com.evil.com/SimpleNotificationService-1.pem",
    "s3": "https://s3.amazonaws.com/attacker-bucket/SimpleNotificationService-1.pem",
    "s3 virtual host": "https://attacker.s3.eu-west-1.amazonaws.com/cert.pem",
    "user info": "https://sns.eu-west-1.amazonaws.com@evil.com/cert.pem",
    "port": "https://sns.eu-west-1.amazonaws.com:8443/cert.pem",
    "no region": "https://sns.amazonaws.com/cert.pem",
    "other service": "https://sqs.eu-west-1.amazonaws.com/cert.pem",
}


@pytest.mark.parametrize("url", BAD_CERT_URLS.values(), ids=BAD_CERT_URLS.keys())
def test_bad_certificate_url_is_refused_before_any_fetch(events_app, url):
    message = sns_signer().notification(delivery("ses-1", "ada@example.com"), cert_url=url)
    status, body = post(events_app, message)
    assert 400 <= status < 500, body
    assert "SigningCertURL" in body["error"]
    assert events_app.fetcher.urls == []
    assert stored_events(events_app) == 0


@pytest.mark.parametrize("version", ["3", "0", None, 1])
def test_other_signature_versions_are_refused_before_any_fetch(events_app, version):
    message = sns_signer().notification(delivery("ses-1", "ada@example.com"))
    message["SignatureVersion"] = version
    status, body = post(events_app, message)
    assert status == 400 and "SignatureVersion" in body["error"]
    assert events_app.fetcher.urls == []
    assert stored_events(events_app) == 0


def test_foreign_topic_is_refused_before_any_fetch(events_app):
    message = sns_signer().notification(
        delivery("ses-1", "ada@example.com"), topic=FOREIGN_TOPIC_ARN
    )
    status, body = post(events_app, message)
    assert status == 403 and "not allowed" in body["error"]
    assert events_app.fetcher.urls == []
    assert stored_events(events_app) == 0


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", json.dumps({"Type": "Notification"}).encode(), b"\xff\xfe"],
    ids=["text", "array", "missing fields", "not utf-8"],
)
def test_malformed_bodies_are_refused(events_app, body):
    status, reply = post(events_app, body)
    assert 400 <= status < 500 and reply["error"]
    assert events_app.fetcher.urls == []


def test_unknown_message_type_is_refused(events_app):
    message = sns_signer().notification(delivery("ses-1", "ada@example.com"))
    message["Type"] = "Surprise"
    assert post(events_app, message)[0] == 400


def test_expired_certificate_is_refused():
    signer = sns_signer()
    later = signer.certificate.not_valid_after_utc.replace(year=2999)
    verifier = sns.SnsVerifier(
        [message_topic := "arn:aws:sns:eu-west-1:1:t"],
        sns.CertificateCache(fetch=lambda url: signer.pem),
        clock=lambda: later,
    )
    message = signer.notification(delivery("ses-1", "a@example.com"), topic=message_topic)
    with pytest.raises(sns.SnsRejected, match="not valid at this time"):
        verifier.verify(message)


def test_empty_allow_list_refuses_every_topic(sqlite_url):
    app, fetcher = make_events_app(sqlite_url, CONSOLE_SNS_TOPIC_ARNS="")
    try:
        status, body = post(app, sns_signer().notification(delivery("s", "a@example.com")))
        assert status == 403 and fetcher.urls == []
    finally:
        dispose(app)


class Visits(list):
    def __call__(self, url: str) -> None:
        self.append(url)


def test_subscription_is_confirmed_for_a_listed_topic(events_app):
    visits = events_app.extensions["console.sns_subscribe_visitor"] = Visits()
    message = sns_signer().subscription_confirmation()
    status, body = post(events_app, message)
    assert (status, body["status"]) == (200, "confirmed")
    assert visits == [message["SubscribeURL"]]
    assert stored_events(events_app) == 0


def test_subscription_for_a_foreign_topic_is_not_confirmed(events_app):
    visits = events_app.extensions["console.sns_subscribe_visitor"] = Visits()
    message = sns_signer().subscription_confirmation(topic=FOREIGN_TOPIC_ARN)
    assert post(events_app, message)[0] == 403
    assert visits == [] and events_app.fetcher.urls == []


def test_subscribe_url_off_the_sns_hosts_is_never_visited(events_app):
    visits = events_app.extensions["console.sns_subscribe_visitor"] = Visits()
    message = sns_signer().subscription_confirmation(
        subscribe_url="https://sns.eu-west-1.amazonaws.com.evil.com/?Action=ConfirmSubscription"
    )
    status, body = post(events_app, message)
    assert status == 400 and "SubscribeURL" in body["error"]
    assert visits == [] and events_app.fetcher.urls == []


def test_tampered_subscription_confirmation_is_not_visited(events_app):
    visits = events_app.extensions["console.sns_subscribe_visitor"] = Visits()
    message = sns_signer().subscription_confirmation()
    message["SubscribeURL"] += "&extra=1"
    assert post(events_app, message)[0] == 403
    assert visits == []


def test_failed_confirmation_is_reported_so_sns_retries(events_app):
    def refuse(url: str) -> None:
        raise OSError("connection refused")

    events_app.extensions["console.sns_subscribe_visitor"] = refuse
    assert post(events_app, sns_signer().subscription_confirmation())[0] == 502


def test_canonical_string_follows_the_documented_field_order():
    notification = {
        "Type": "Notification",
        "MessageId": "m",
        "TopicArn": "t",
        "Message": "body",
        "Timestamp": "ts",
        "Subject": "s",
    }
    expected = (
        "Message\nbody\nMessageId\nm\nSubject\ns\nTimestamp\nts\nTopicArn\nt\nType\nNotification\n"
    )
    assert sns.canonical_string(notification) == expected.encode()
    del notification["Subject"]
    assert b"Subject" not in sns.canonical_string(notification)
    confirmation = {
        "Type": "SubscriptionConfirmation",
        "MessageId": "m",
        "TopicArn": "t",
        "Message": "body",
        "Timestamp": "ts",
        "Token": "tok",
        "SubscribeURL": "https://sns.eu-west-1.amazonaws.com/?x",
    }
    assert sns.canonical_string(confirmation).decode().splitlines()[::2] == [
        "Message",
        "MessageId",
        "SubscribeURL",
        "Timestamp",
        "Token",
        "TopicArn",
        "Type",
    ]


@pytest.mark.parametrize(
    "url",
    [
        "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem",
        "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-abc.pem",
        "https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-abc.pem",
    ],
)
def test_real_sns_certificate_urls_are_allowed(url):
    assert sns.is_sns_url(url, pem=True)
