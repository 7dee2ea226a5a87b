"""Login, sessions, CSRF, throttling, cookies and security headers of the console."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import func, select

from console.app import create_app
from console.models import OperatorUser, Suppression
from console.web.extensions import db
from console.web.throttle import LoginThrottle
from tests.conftest import TEST_SECRET_KEY


def login_form_token(client) -> str:
    page = client.get("/login")
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def log_in(client, username: str, password: str = "correct horse", token: str | None = None):
    token = token or login_form_token(client)
    form = {"username": username, "password": password, "csrf_token": token}
    return client.post("/login", data=form)


def test_anonymous_visitor_is_sent_to_login(app):
    response = app.test_client().get("/intents?q=order-1")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=")


def test_htmx_poll_after_logout_redirects_the_whole_page(app):
    response = app.test_client().get("/", headers={"HX-Request": "true"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"].startswith("/login")


def test_login_with_the_right_password_opens_the_console(app, console_user):
    console_user("ada", "viewer")
    client = app.test_client()
    response = log_in(client, "ada")
    assert response.status_code == 302 and response.headers["Location"] == "/"
    assert client.get("/").status_code == 200
    with app.app_context():
        user = db.session.execute(select(OperatorUser)).scalar_one()
        assert user.last_login_at is not None


def test_login_goes_back_to_the_page_asked_for_but_never_off_site(app, console_user):
    console_user("ada", "viewer")
    client = app.test_client()
    token = login_form_token(client)
    form = {"username": "ada", "password": "correct horse", "csrf_token": token}
    assert client.post("/login", data={**form, "next": "/intents?q=x"}).headers["Location"] == (
        "/intents?q=x"
    )
    for hostile in ("https://evil.example/", "//evil.example/", "javascript:alert(1)"):
        client = app.test_client()
        form["csrf_token"] = login_form_token(client)
        assert client.post("/login", data={**form, "next": hostile}).headers["Location"] == "/"


def test_wrong_password_unknown_user_and_inactive_user_are_refused_alike(app, console_user):
    console_user("ada", "viewer")
    console_user("gone", "operator", active=False)
    for username, password in (
        ("ada", "wrong"),
        ("nobody", "correct horse"),
        ("gone", "correct horse"),
    ):
        client = app.test_client()
        response = log_in(client, username, password)
        assert response.status_code == 401
        assert "Wrong username or password" in response.text
        assert client.get("/").status_code == 302


def test_login_starts_a_new_session(app, console_user):
    """Anything in the session before login, including the CSRF token, is gone after it."""
    console_user("ada", "viewer")
    client = app.test_client()
    token = login_form_token(client)
    with client.session_transaction() as flask_session:
        flask_session["planted"] = "by an attacker"
    log_in(client, "ada", token=token)
    with client.session_transaction() as flask_session:
        assert "planted" not in flask_session
        assert flask_session.get("_csrf_token") != token
        assert flask_session.get("_user_id")


def test_deactivated_user_is_logged_out_on_the_next_request(app, console_client):
    client = console_client("viewer", "ada")
    with app.app_context():
        db.session.query(OperatorUser).filter_by(username="ada").update({"active": False})
        db.session.commit()
    assert client.get("/").status_code == 302


def test_logout_needs_a_post_with_the_token(app, console_client):
    client = console_client("viewer")
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 400
    assert client.get("/").status_code == 200
    assert client.post("/logout", data={"csrf_token": client.csrf_token}).status_code == 302
    assert client.get("/").status_code == 302


def test_post_without_or_with_a_wrong_csrf_token_is_refused_and_changes_nothing(
    app, console_client
):
    client = console_client("operator")
    form = {"address": "eve@example.com", "reason": "asked to stop"}
    assert client.post("/suppressions", data=form).status_code == 400
    assert client.post("/suppressions", data={**form, "csrf_token": "forged"}).status_code == 400
    other = console_client("operator", "other-operator")
    assert (
        client.post("/suppressions", data={**form, "csrf_token": other.csrf_token}).status_code
        == 400
    )
    with app.app_context():
        assert db.session.execute(select(func.count()).select_from(Suppression)).scalar() == 0
    response = client.post("/suppressions", data={**form, "csrf_token": client.csrf_token})
    assert response.status_code == 303


def test_csrf_token_is_also_accepted_from_the_htmx_header(app, console_client, add_intent):
    client = console_client("operator")
    intent_id = add_intent("pending")
    headers = {"X-CSRFToken": client.csrf_token, "HX-Request": "true"}
    response = client.post(f"/intents/{intent_id}/preview", headers=headers)
    assert response.status_code == 200
    assert 'id="preview"' in response.text


def test_login_form_itself_needs_the_token(app, console_user):
    console_user("ada", "viewer")
    client = app.test_client()
    client.get("/login")
    response = client.post("/login", data={"username": "ada", "password": "correct horse"})
    assert response.status_code == 400
    assert client.get("/").status_code == 302


class FakeClock:
    def __init__(self) -> None:
        self.now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


@pytest.fixture
def throttled_app(app):
    clock = FakeClock()
    app.extensions["console.login_throttle"] = LoginThrottle(
        free_failures=2, address_limit=5, address_window_seconds=60, clock=clock
    )
    return app, clock


def test_repeated_failures_delay_the_next_try_from_that_address_even_with_the_right_password(
    throttled_app, console_user
):
    app, clock = throttled_app
    console_user("ada", "operator")
    client = app.test_client()
    for _ in range(3):
        assert log_in(client, "ada", "guess").status_code == 401
    refused = log_in(client, "ada")
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert "Too many failed logins" in refused.text
    clock.now += dt.timedelta(seconds=int(refused.headers["Retry-After"]))
    assert log_in(client, "ada").status_code == 302


def test_repeated_failures_from_one_address_lock_that_address(throttled_app, console_user):
    app, clock = throttled_app
    console_user("ada", "operator")
    client = app.test_client()
    for number in range(5):
        assert log_in(client, f"user{number}", "guess").status_code == 401
    assert log_in(client, "ada").status_code == 429
    clock.now += dt.timedelta(seconds=30)
    assert log_in(client, "ada").status_code == 429
    elsewhere = app.test_client()
    token = login_form_token(elsewhere)
    form = {"username": "ada", "password": "correct horse", "csrf_token": token}
    response = elsewhere.post("/login", data=form, environ_base={"REMOTE_ADDR": "10.0.0.9"})
    assert response.status_code == 302


def test_a_successful_login_clears_the_account_count(throttled_app, console_user):
    app, _ = throttled_app
    console_user("ada", "operator")
    client = app.test_client()
    for _ in range(2):
        log_in(client, "ada", "guess")
    assert log_in(client, "ada").status_code == 302
    client = app.test_client()
    for _ in range(2):
        assert log_in(client, "ada", "guess").status_code == 401
    assert log_in(client, "ada").status_code == 302


def test_security_headers_and_session_cookie_flags(app, console_user):
    console_user("ada", "viewer")
    client = app.test_client()
    page = client.get("/login")
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Cache-Control"] == "no-store"
    cookie = page.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert "<script>" not in page.text and " on" + "click=" not in page.text


def test_cookies_are_secure_when_configured(db_url):
    app = create_app(
        {
            "CONSOLE_DATABASE_URL": db_url,
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "CONSOLE_COOKIE_SECURE": "1",
        }
    )
    cookie = app.test_client().get("/login").headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie
    with app.app_context():
        db.engine.dispose()


def test_pages_load_only_the_consoles_own_scripts(app, console_client):
    client = console_client("admin")
    for path in ("/", "/intents", "/suppressions", "/users", "/audit"):
        page = client.get(path).text
        sources = re.findall(r"<script[^>]*src=\"([^\"]+)\"", page)
        assert sources == ["/static/htmx.min.js", "/static/console.js"], path
        assert re.search(r"<script(?![^>]*src=)", page) is None, path
        assert 'style="' not in page, path
