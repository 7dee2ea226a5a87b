"""Server-side session validity: a copied cookie dies with logout, idle time and age."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from console.models import AuditEntry, OperatorUser
from console.web.extensions import db


def copy_of(app, client):
    """A second browser holding a copy of `client`'s session cookie (stolen, or another tab)."""
    cookie = client.get_cookie("session")
    assert cookie is not None
    thief = app.test_client()
    thief.set_cookie("session", cookie.value)
    return thief


def is_logged_in(client) -> bool:
    return client.get("/").status_code == 200


def generation_of(app, username: str) -> int:
    with app.app_context():
        query = select(OperatorUser.session_generation).where(OperatorUser.username == username)
        return db.session.execute(query).scalar_one()


def audit_actions(app) -> list[tuple[str, str, str]]:
    with app.app_context():
        rows = db.session.execute(
            select(AuditEntry.actor, AuditEntry.action, AuditEntry.target).order_by(AuditEntry.id)
        )
        return [tuple(row) for row in rows]


def test_a_cookie_copied_before_logout_is_refused_after_it(app, console_client):
    client = console_client("operator", "ada")
    thief = copy_of(app, client)
    assert is_logged_in(thief)
    assert client.post("/logout", data={"csrf_token": client.csrf_token}).status_code == 302
    assert not is_logged_in(client)
    response = thief.get("/")
    assert response.status_code == 302 and response.headers["Location"].startswith("/login")


def test_logout_ends_every_session_of_the_account(app, console_client):
    laptop = console_client("viewer", "ada")
    phone = copy_of(app, laptop)
    before = generation_of(app, "ada")
    laptop.post("/logout", data={"csrf_token": laptop.csrf_token})
    assert generation_of(app, "ada") == before + 1
    assert not is_logged_in(phone)


def test_a_session_idle_for_longer_than_the_limit_ends(app, console_client):
    client = console_client("viewer", "ada")
    with client.session_transaction() as flask_session:
        flask_session["_seen_at"] = time.time() - 59 * 60
    assert is_logged_in(client)
    with client.session_transaction() as flask_session:
        flask_session["_seen_at"] = time.time() - 61 * 60
    assert not is_logged_in(client)


def test_a_session_ends_at_its_maximum_age_even_when_in_use(app, console_client):
    client = console_client("viewer", "ada")
    with client.session_transaction() as flask_session:
        flask_session["_login_at"] = time.time() - 12 * 3600 - 60
    assert not is_logged_in(client)


def test_a_session_without_the_servers_stamp_is_refused(app, console_client):
    """A cookie signed with the key but made before this release (or by hand) has no stamp."""
    client = console_client("viewer", "ada")
    with client.session_transaction() as flask_session:
        del flask_session["_gen"]
    assert not is_logged_in(client)


def change_password(client, current: str, new: str, again: str | None = None):
    form = {
        "current_password": current,
        "new_password": new,
        "new_password_again": new if again is None else again,
        "csrf_token": client.csrf_token,
    }
    return client.post("/account/password", data=form)


def test_a_user_changes_their_own_password_with_the_current_one(app, console_client):
    client = console_client("viewer", "ada")
    other = copy_of(app, client)
    assert client.get("/account").status_code == 200
    for typed in (
        ("wrong", "new password 1"),
        ("correct horse", "short"),
        ("correct horse", "new password 1", "typo"),
    ):
        refused = change_password(client, *typed)
        assert refused.status_code == 303 and refused.location.endswith("/account")
        assert "Not changed" in client.get("/account").text
    assert is_logged_in(other), "a refused change ends nothing"
    response = change_password(client, "correct horse", "new password 1")
    assert response.status_code == 303
    assert is_logged_in(client), "the session that changed it goes on"
    assert not is_logged_in(other), "every other session ends"
    assert ("ada", "password_change", "ada") in audit_actions(app)
    fresh = app.test_client()
    with fresh.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = {"username": "ada", "password": "new password 1", "csrf_token": "t"}
    assert fresh.post("/login", data=form).status_code == 302


def test_log_out_everywhere_else_keeps_this_session(app, console_client):
    client = console_client("viewer", "ada")
    other = copy_of(app, client)
    response = client.post("/account/sessions/end", data={"csrf_token": client.csrf_token})
    assert response.status_code == 303
    assert is_logged_in(client) and not is_logged_in(other)


def test_an_admin_sets_a_new_password_for_another_user(app, console_client):
    admin = console_client("admin", "root")
    ada = console_client("operator", "ada")
    ada_id = _user_id(app, "ada")
    form = {"password": "fresh password", "csrf_token": admin.csrf_token}
    assert admin.post(f"/users/{ada_id}/password", data=form).status_code == 303
    assert not is_logged_in(ada)
    assert ("root", "user_password_set", "ada") in audit_actions(app)
    short = {"password": "short", "csrf_token": admin.csrf_token}
    refused = admin.post(f"/users/{ada_id}/password", data=short)
    assert refused.status_code == 303 and "Password not changed" in admin.get("/users").text


@pytest.mark.parametrize("change", ["role", "deactivate-and-reactivate"])
def test_a_role_change_or_a_deactivation_ends_the_users_sessions(app, console_client, change):
    admin = console_client("admin", "root")
    ada = console_client("operator", "ada")
    ada_id = _user_id(app, "ada")
    token = {"csrf_token": admin.csrf_token}
    if change == "role":
        response = admin.post(f"/users/{ada_id}/role", data={**token, "role": "viewer"})
        assert response.status_code == 303
        assert ("root", "user_role", "ada") in audit_actions(app)
    else:
        form = {**token, "reason": "on leave"}
        assert admin.post(f"/users/{ada_id}/deactivate", data=form).status_code == 303
        assert admin.post(f"/users/{ada_id}/activate", data=token).status_code == 303
    assert not is_logged_in(ada)


def test_an_admin_cannot_demote_the_last_admin_or_themselves(app, console_client):
    admin = console_client("admin", "root")
    root_id = _user_id(app, "root")
    form = {"role": "viewer", "csrf_token": admin.csrf_token}
    refused = admin.post(f"/users/{root_id}/role", data=form)
    assert refused.status_code == 303 and "Role not changed" in admin.get("/users").text
    assert is_logged_in(admin)


def _user_id(app, username: str) -> int:
    with app.app_context():
        query = select(OperatorUser.id).where(OperatorUser.username == username)
        return db.session.execute(query).scalar_one()
