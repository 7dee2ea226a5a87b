"""/metrics answers only a request carrying CONSOLE_METRICS_TOKEN as a bearer token, when set."""

from __future__ import annotations

import pytest

from tests.support.provider_fixtures import dispose, make_events_app

TOKEN = "metrics-token-5b1e9c"


@pytest.fixture
def guarded(db_url):
    app, _ = make_events_app(db_url, CONSOLE_METRICS_TOKEN=TOKEN)
    yield app
    dispose(app)


@pytest.fixture
def open_app(db_url):
    app, _ = make_events_app(db_url)
    yield app
    dispose(app)


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN],
)
def test_without_the_token_metrics_answer_401(guarded, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    answer = guarded.test_client().get("/metrics", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert b"outbox_" not in answer.data


@pytest.mark.parametrize("written", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"Bearer  {TOKEN} "])
def test_with_the_token_metrics_are_served(guarded, written):
    answer = guarded.test_client().get("/metrics", headers={"Authorization": written})
    assert answer.status_code == 200
    assert answer.content_type.startswith("text/plain")


def test_without_the_setting_metrics_stay_open(open_app):
    assert open_app.test_client().get("/metrics").status_code == 200


def test_health_stays_open_with_the_token_set(guarded):
    assert guarded.test_client().get("/healthz").status_code in (200, 503)
