"""Styled 403, 404, 409 and 500 pages that say what is needed; JSON on webhooks and metrics."""

from __future__ import annotations

import pytest
from werkzeug.exceptions import Conflict

HTML = {"Accept": "text/html,application/xhtml+xml"}


def test_403_says_which_role_is_needed(console_client):
    viewer = console_client("viewer")
    response = viewer.get("/audit", headers=HTML)
    assert response.status_code == 403
    text = response.get_data(as_text=True)
    assert "<nav" in text or "<header" in text, "the page is styled, inside the console layout"
    assert "this needs the operator role; you are a viewer" in text.lower()


def test_403_for_an_admin_page_names_admin(console_client):
    text = console_client("operator").get("/users", headers=HTML).get_data(as_text=True)
    assert "this needs the admin role; you are an operator" in text.lower()


def test_404_is_styled_and_names_the_address(console_client):
    response = console_client("viewer").get("/no/such/page", headers=HTML)
    assert response.status_code == 404
    text = response.get_data(as_text=True)
    assert "404" in text and "/no/such/page" in text and "dashboard" in text.lower()


def test_404_keeps_the_views_own_message(console_client):
    text = console_client("viewer").get("/intents/987654", headers=HTML).get_data(as_text=True)
    assert "There is no intent 987654." in text


def test_409_and_500_are_styled(app, console_client):
    def conflict():
        raise Conflict()

    def broken():
        raise RuntimeError("secret internal detail")

    app.add_url_rule("/test-conflict", "test_conflict", conflict)
    app.add_url_rule("/test-broken", "test_broken", broken)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    client = console_client("viewer")
    response = client.get("/test-conflict", headers=HTML)
    assert response.status_code == 409
    assert "changed" in response.get_data(as_text=True) and "reload" in response.text.lower()
    response = client.get("/test-broken", headers=HTML)
    assert response.status_code == 500
    text = response.get_data(as_text=True)
    assert "500" in text and "secret internal detail" not in text
    assert "logged" in text.lower()


@pytest.mark.parametrize("path", ["/webhooks/no-such-provider", "/metrics/nothing-here"])
def test_webhooks_and_metrics_answer_json(app, path):
    response = app.test_client().get(path, headers=HTML)
    assert response.status_code in (404, 405)
    assert response.is_json, response.text
    assert "error" in response.get_json()


def test_webhook_500_is_json(app):
    def broken():
        raise RuntimeError("boom")

    app.add_url_rule("/webhooks/test-broken", "test_webhook_broken", broken)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = app.test_client().get("/webhooks/test-broken", headers=HTML)
    assert response.status_code == 500 and response.is_json
    assert "boom" not in response.text


def test_a_client_not_asking_for_html_gets_no_page(console_client):
    response = console_client("viewer").get("/audit", headers={"Accept": "application/json"})
    assert response.status_code == 403 and "<nav" not in response.get_data(as_text=True)
