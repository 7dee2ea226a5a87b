"""SNS: made-up certificate URLs and foreign topics never spend the certificate-fetch budget,
so a genuine message after them still gets its certificate fetched (after a key rotation)."""

from __future__ import annotations

import json

import httpx
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

MADE_UP = [
    "https://sns.s3.amazonaws.com/SimpleNotificationService-{n:x}.pem",
    "https://sns.s3-eu-west-1.amazonaws.com/SimpleNotificationService-{n:x}.pem",
    "https://sns.eu-west-1.amazonaws.com/evil-{n}.pem",
    "https://sns.eu-west-1.amazonaws.com/certs/SimpleNotificationService-{n:x}.pem",
    "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-{n:x}.pem?v={n}",
    "https://sns.ab.amazonaws.com/SimpleNotificationService-{n:x}.pem",
    "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x{n}.pem",
]


class OnlyTheRealCertificate:
    """Serves the signer's PEM at CERT_URL; any other URL fails as a missing object would."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        if url != CERT_URL:
            raise httpx.ConnectError("no such certificate")
        return sns_signer().pem


@pytest.fixture
def app_and_fetcher(db_url):
    app, _ = make_events_app(db_url)
    fetcher = OnlyTheRealCertificate()
    app.extensions["console.sns_certificates"] = sns.CertificateCache(fetch=fetcher)
    yield app, fetcher
    dispose(app)


def post(app, message) -> int:
    return app.test_client().post("/webhooks/ses", data=json.dumps(message)).status_code


def test_made_up_urls_and_foreign_topics_leave_the_budget_to_a_genuine_message(app_and_fetcher):
    app, fetcher = app_and_fetcher
    signer = sns_signer()
    for n in range(20):
        made_up = MADE_UP[n % len(MADE_UP)].format(n=n + 1)
        forged = signer.notification(delivery(f"ses-{n}", "ada@example.com"), cert_url=made_up)
        assert post(app, forged) == 400
        shaped = f"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-{n + 1:x}.pem"
        foreign = signer.notification(
            delivery(f"ses-f{n}", "ada@example.com"), topic=FOREIGN_TOPIC_ARN, cert_url=shaped
        )
        assert post(app, foreign) == 403
    assert fetcher.urls == []
    genuine = signer.notification(delivery("ses-genuine", "ada@example.com"))
    assert post(app, genuine) == 200
    assert fetcher.urls == [CERT_URL]
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(ProviderEvent)) == 1
