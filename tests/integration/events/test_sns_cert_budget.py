"""SNS: forged messages naming made-up certificate URLs of the right shape, on an allowed topic,
cost one fetch per URL and never make the endpoint refuse a genuine message after a rotation."""

from __future__ import annotations

import json

import httpx
import pytest

from console.events import sns
from tests.support.event_checks import all_events
from tests.support.provider_fixtures import delivery, dispose, make_events_app, sns_signer

ROTATED = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-f00dfacecafe0001.pem"


def made_up(n: int) -> str:
    return f"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-{n:032x}.pem"


class OnlyTheRotatedCertificate:
    """Serves the signer's PEM at ROTATED; any other URL is missing, as at AWS."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        if url != ROTATED:
            raise httpx.ConnectError("404 Not Found")
        return sns_signer().pem


@pytest.fixture
def app_and_fetcher(db_url):
    app, _ = make_events_app(db_url)
    fetcher = OnlyTheRotatedCertificate()
    app.extensions["console.sns_certificates"] = sns.CertificateCache(fetch=fetcher)
    yield app, fetcher
    dispose(app)


def post(app, message) -> int:
    return app.test_client().post("/webhooks/ses", data=json.dumps(message)).status_code


def test_forged_shaped_urls_leave_the_genuine_rotated_message_accepted(
    app_and_fetcher, session_factory
):
    app, fetcher = app_and_fetcher
    signer = sns_signer()
    forged_count = 3 * 12
    for n in range(forged_count):
        forged = signer.notification(delivery(f"f-{n}", "ada@example.com"), cert_url=made_up(n))
        assert post(app, forged) == 502, n
    genuine = signer.notification(delivery("ses-rotated", "ada@example.com"), cert_url=ROTATED)
    assert post(app, genuine) == 200
    assert fetcher.urls[-1] == ROTATED
    assert len(all_events(session_factory)) == 1


def test_each_made_up_url_is_fetched_once_while_its_failure_is_remembered(app_and_fetcher):
    app, fetcher = app_and_fetcher
    signer = sns_signer()
    for round_ in range(3):
        for n in range(5):
            forged = signer.notification(
                delivery(f"f-{round_}-{n}", "ada@example.com"), cert_url=made_up(n)
            )
            assert post(app, forged) == 502
    assert fetcher.urls == [made_up(n) for n in range(5)]
