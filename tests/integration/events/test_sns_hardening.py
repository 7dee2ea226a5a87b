"""SNS: certificate fetches that forged messages cannot multiply, and fresh messages only."""

from __future__ import annotations

import datetime as dt
import threading

import httpx
import pytest
from sqlalchemy import func, select

from console.events import sns
from console.models import ProviderEvent
from console.web.extensions import db
from tests.support.provider_fixtures import delivery, dispose, make_events_app, sns_signer


def cert_url(n: int) -> str:
    return f"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-{n:016x}.pem"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingFetcher:
    def __init__(self, *, fail: bool = False, gate: threading.Event | None = None) -> None:
        self.urls: list[str] = []
        self.fail = fail
        self.gate = gate
        self._lock = threading.Lock()

    def __call__(self, url: str) -> bytes:
        with self._lock:
            self.urls.append(url)
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail:
            raise httpx.ConnectError("no route to host")
        return sns_signer().pem


def test_a_failed_fetch_is_remembered_for_a_while():
    clock, fetcher = Clock(), CountingFetcher(fail=True)
    cache = sns.CertificateCache(fetch=fetcher, clock=clock)
    for _ in range(3):
        with pytest.raises(sns.SnsRejected, match="could not be fetched"):
            cache.certificate(cert_url(1))
    assert fetcher.urls == [cert_url(1)], "one fetch, then the remembered failure"
    clock.now += sns.FAILED_FETCH_TTL_SECONDS + 1
    with pytest.raises(sns.SnsRejected):
        cache.certificate(cert_url(1))
    assert len(fetcher.urls) == 2


def test_one_fetch_at_a_time_per_url():
    gate = threading.Event()
    fetcher = CountingFetcher(gate=gate)
    cache = sns.CertificateCache(fetch=fetcher)
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.certificate(cert_url(2))))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    threading.Event().wait(0.3)
    gate.set()
    for thread in threads:
        thread.join(10)
    assert fetcher.urls == [cert_url(2)]
    assert len(results) == 5 and len({id(result) for result in results}) == 1


@pytest.fixture
def events_app(sqlite_url):
    app, fetcher = make_events_app(sqlite_url)
    yield app
    dispose(app)


def sns_timestamp(age: dt.timedelta) -> str:
    moment = dt.datetime.now(dt.UTC) - age
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@pytest.mark.parametrize(
    "age,accepted",
    [
        (dt.timedelta(minutes=30), True),
        (dt.timedelta(seconds=-30), True),  # a clock a little ahead of ours
        (dt.timedelta(hours=1, minutes=1), False),
        (dt.timedelta(days=400), False),
        (dt.timedelta(minutes=-10), False),
    ],
)
def test_only_fresh_messages_are_accepted(events_app, age, accepted):
    message = sns_signer().notification(
        delivery("ses-1", "ada@example.com"), timestamp=sns_timestamp(age)
    )
    response = events_app.test_client().post("/webhooks/ses", json=message)
    assert response.status_code == (200 if accepted else 403), response.text
    with events_app.app_context():
        stored = db.session.scalar(select(func.count()).select_from(ProviderEvent))
    assert stored == (1 if accepted else 0)


def test_a_timestamp_that_is_not_a_time_is_refused(events_app):
    message = sns_signer().notification(delivery("ses-1", "a@example.com"), timestamp="yesterday")
    assert events_app.test_client().post("/webhooks/ses", json=message).status_code in (400, 403)
