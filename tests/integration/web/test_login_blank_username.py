"""A login with a blank username counts once against the client's address, like any other."""

from __future__ import annotations

import re

import pytest

from console.store import login_failures
from console.store.login_failures import ANY_USER
from console.web.extensions import db

ADDRESS = "127.0.0.1"  # the test client's


def attempt(app, username: str):
    client = app.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    form = {"username": username, "password": "guess", "csrf_token": token}
    return client.post("/login", data=form)


def address_failures(app) -> int:
    with app.app_context():
        count = login_failures.read_count(db.session, ANY_USER, ADDRESS)
        return 0 if count is None else count.failures


@pytest.mark.parametrize("blank", ["", "   ", "\u3000"])
def test_a_blank_username_counts_once_against_the_address(app, blank):
    for expected in (1, 2, 3):
        assert attempt(app, blank).status_code == 401
        assert address_failures(app) == expected


def test_blank_usernames_meet_the_address_limit_no_sooner_than_named_ones(app):
    from console.web.throttle import LoginThrottle

    app.extensions["console.login_throttle"] = LoginThrottle(address_limit=6)
    for _ in range(5):
        assert attempt(app, "").status_code == 401
    assert attempt(app, "someone").status_code == 401  # the sixth failure
    assert attempt(app, "").status_code == 429
