"""Usernames: NFKC, letters/digits/./_/- only, 3-64 characters, unique whatever the case."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.models import OperatorUser
from console.store.accounts import UserError, create_user, find_user
from console.web.extensions import db

REFUSED = [
    ("Admin", "already exists"),  # beside "admin"
    ("ADMIN", "already exists"),
    ("\uff21dmin", "already exists"),  # full-width A: NFKC makes it "Admin"
    ("\u0430dmin", "letters"),  # Cyrillic a
    ("ad\u200bmin", "letters"),  # zero-width space
    ("ad\nmin", "letters"),
    ("ad\rmin", "letters"),
    ("ad min", "letters"),
    ("ad<min>", "letters"),
    ("ab", "3 to 64"),
    ("a" * 65, "3 to 64"),
    ("", "3 to 64"),
]


@pytest.fixture
def admin_exists(app):
    with app.app_context():
        create_user(db.session, "admin", "long enough pw", "admin")
        db.session.commit()


@pytest.mark.parametrize("username,problem", REFUSED)
def test_look_alike_and_unsafe_usernames_are_refused(app, admin_exists, username, problem):
    with app.app_context():
        with pytest.raises(UserError, match=problem):
            create_user(db.session, username, "long enough pw", "viewer")
        db.session.rollback()
        names = db.session.execute(select(OperatorUser.username)).scalars().all()
    assert names == ["admin"]


@pytest.mark.parametrize(
    "typed,stored",
    [("ada.lovelace", "ada.lovelace"), ("ops_1", "ops_1"), ("j-doe", "j-doe"), ("ｊｏｅ", "joe")],
)
def test_valid_usernames_are_stored_normalised(app, typed, stored):
    with app.app_context():
        user = create_user(db.session, f"  {typed} ", "long enough pw", "viewer")
        db.session.commit()
        assert user.username == stored


def test_the_users_page_says_why_a_name_is_refused(app, console_client, admin_exists):
    client = console_client("admin", "root")
    form = {"username": "\u0430dmin", "password": "long enough", "role": "viewer"}
    response = client.post("/users", data={**form, "csrf_token": client.csrf_token})
    assert response.status_code == 303
    assert "letters" in client.get(response.location).text


def test_existing_accounts_with_other_names_keep_working(app, console_user):
    """Accounts made before these rules (any name) still log in, by their exact name."""
    console_user("Legacy User", "viewer")
    console_user("ada", "viewer")
    for typed, expected in (("Legacy User", "Legacy User"), ("ADA", "ada"), ("ａｄａ", "ada")):
        with app.app_context():
            assert find_user(db.session, typed).username == expected
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = {"username": "Legacy User", "password": "correct horse", "csrf_token": "t"}
    assert client.post("/login", data=form).status_code == 302


def test_two_legacy_accounts_differing_only_in_case_each_need_their_exact_name(app, console_user):
    console_user("Bob", "viewer")
    console_user("bob", "operator")
    with app.app_context():
        assert find_user(db.session, "Bob").role == "viewer"
        assert find_user(db.session, "bob").role == "operator"
        assert find_user(db.session, "BOB") is None
