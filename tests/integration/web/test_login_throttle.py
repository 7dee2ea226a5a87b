"""Login throttling through HTTP, behind one trusted proxy: it cannot lock anyone out."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from console.app import create_app
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY

ATTACKER = "203.0.113.66"
OPERATOR = "198.51.100.7"


@pytest.fixture
def make_app(db_url):
    apps = []

    def make():
        app = create_app(
            {
                "CONSOLE_DATABASE_URL": db_url,
                "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
                "CONSOLE_TRUSTED_PROXIES": "1",
                "TESTING": True,
            }
        )
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


@pytest.fixture
def proxied(make_app, console_user_on):
    app = make_app()
    console_user_on(app, "admin", "admin")
    return app


@pytest.fixture
def console_user_on():
    from werkzeug.security import generate_password_hash

    from console.models import OperatorUser, utcnow

    def create(app, username: str, role: str, password: str = "correct horse") -> None:
        with app.app_context():
            user = OperatorUser(
                username=username,
                password_hash=generate_password_hash(password, method="pbkdf2:sha256:1000"),
                role=role,
                active=True,
                created_at=utcnow(),
            )
            db.session.add(user)
            db.session.commit()

    return create


def attempt(app, username: str, password: str, address: str):
    client = app.test_client()
    headers = {"X-Forwarded-For": address}
    page = client.get("/login", headers=headers)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    form = {"username": username, "password": password, "csrf_token": token}
    return client.post("/login", data=form, headers=headers)


def test_failures_from_one_address_never_stop_a_login_from_another(proxied):
    for _ in range(30):
        assert attempt(proxied, "admin", "guess", ATTACKER).status_code in (401, 429)
    assert attempt(proxied, "admin", "correct horse", OPERATOR).status_code == 302


def test_the_attackers_own_address_has_to_wait(proxied):
    codes = [attempt(proxied, "admin", "guess", ATTACKER).status_code for _ in range(6)]
    assert codes[:3] == [401, 401, 401] and 429 in codes
    refused = attempt(proxied, "admin", "correct horse", ATTACKER)
    assert refused.status_code == 429
    assert 0 < int(refused.headers["Retry-After"]) <= 900
    assert "Too many failed logins" in refused.text


def test_the_count_is_shared_by_every_process_and_survives_a_restart(make_app, console_user_on):
    first = make_app()
    console_user_on(first, "admin", "admin")
    for _ in range(4):
        attempt(first, "admin", "guess", ATTACKER)
    with first.app_context():
        db.engine.dispose()  # "restart"
    second = make_app()
    assert attempt(second, "admin", "correct horse", ATTACKER).status_code == 429
    assert attempt(second, "admin", "correct horse", OPERATOR).status_code == 302


def test_a_username_in_another_case_or_width_is_the_same_pair(proxied):
    for name in ("admin", "ADMIN", "Admin", "ａｄｍｉｎ"):
        attempt(proxied, name, "guess", ATTACKER)
    assert attempt(proxied, "admin", "correct horse", ATTACKER).status_code == 429


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def clocked(proxied):
    from console.web.throttle import LoginThrottle

    clock = Clock()
    proxied.extensions["console.login_throttle"] = LoginThrottle(
        address_limit=10, address_window_seconds=600, clock=clock
    )
    return proxied, clock


def test_delays_grow_and_end_without_an_operator(clocked):
    app, clock = clocked
    for _ in range(3):
        assert attempt(app, "admin", "guess", ATTACKER).status_code == 401
    waits = []
    for _ in range(4):
        assert attempt(app, "admin", "guess", ATTACKER).status_code == 401
        refused = attempt(app, "admin", "correct horse", ATTACKER)
        assert refused.status_code == 429
        waits.append(int(refused.headers["Retry-After"]))
        clock.advance(waits[-1])
    assert waits == sorted(waits) and waits[-1] >= 4 * waits[0], waits
    assert attempt(app, "admin", "correct horse", ATTACKER).status_code == 302


def test_a_correct_login_clears_the_pair_but_not_the_address(clocked):
    app, clock = clocked
    for _ in range(4):
        attempt(app, "admin", "guess", ATTACKER)
    clock.advance(60)
    assert attempt(app, "admin", "correct horse", ATTACKER).status_code == 302
    assert attempt(app, "admin", "guess", ATTACKER).status_code == 401  # a fresh count


def test_too_many_failures_from_one_address_block_that_address_only(clocked, console_user_on):
    app, clock = clocked
    for number in range(10):
        assert attempt(app, f"user{number}", "guess", ATTACKER).status_code == 401
    blocked = attempt(app, "admin", "correct horse", ATTACKER)
    assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) <= 600
    assert attempt(app, "admin", "correct horse", OPERATOR).status_code == 302
    clock.advance(601)
    assert attempt(app, "admin", "correct horse", ATTACKER).status_code == 302
