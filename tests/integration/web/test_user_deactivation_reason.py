"""Deactivating a user takes a reason, shown in the form and kept in the audit log."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.models import AuditEntry, OperatorUser
from console.store import accounts
from console.store.actions import ActionRefused
from console.web.extensions import db


def _user_id(app, username: str) -> int:
    with app.app_context():
        query = select(OperatorUser.id).filter_by(username=username)
        return db.session.execute(query).scalar_one()


def _entries(app, action: str) -> list[AuditEntry]:
    with app.app_context():
        query = select(AuditEntry).filter_by(action=action).order_by(AuditEntry.id)
        return list(db.session.execute(query).scalars())


def test_the_form_asks_for_a_reason(console_client, console_user):
    console_user("sam", "viewer")
    text = console_client("admin", "root").get("/users").get_data(as_text=True)
    form = text[text.index('/deactivate"') :]
    form = form[: form.index("</form>")]
    assert 'name="reason"' in form and "required" in form


def test_the_reason_is_audited(app, console_client, console_user):
    console_user("sam", "viewer")
    admin = console_client("admin", "root")
    sam = _user_id(app, "sam")
    data = {"csrf_token": admin.csrf_token, "reason": "  left the company  "}
    assert admin.post(f"/users/{sam}/deactivate", data=data).status_code == 303
    [entry] = _entries(app, "user_deactivate")
    assert (entry.actor, entry.target, entry.reason) == ("root", "sam", "left the company")
    page = admin.get("/audit?action=user_deactivate").get_data(as_text=True)
    assert "left the company" in page


def test_a_too_long_reason_is_refused(app, console_client, console_user):
    console_user("sam", "viewer")
    admin = console_client("admin", "root")
    sam = _user_id(app, "sam")
    data = {"csrf_token": admin.csrf_token, "reason": "x" * 2001}
    response = admin.post(f"/users/{sam}/deactivate", data=data)
    assert response.status_code == 303 and response.location.endswith("/users")
    assert "longer than 2000 characters" in admin.get("/users").get_data(as_text=True)
    assert _entries(app, "user_deactivate") == []
    with app.app_context():
        assert db.session.get(OperatorUser, sam).active


@pytest.mark.parametrize("reason", [None, "", "   ", "\t\n"])
def test_a_missing_or_blank_reason_is_refused_by_the_server(
    app, console_client, console_user, reason
):
    """The form's `required` is not the guard: a hand-made POST without a reason changes nothing."""
    console_user("sam", "viewer")
    admin = console_client("admin", "root")
    sam = _user_id(app, "sam")
    data = {"csrf_token": admin.csrf_token}
    if reason is not None:
        data["reason"] = reason
    response = admin.post(f"/users/{sam}/deactivate", data=data)
    assert response.status_code == 303 and response.location.endswith("/users")
    page = admin.get("/users").get_data(as_text=True)
    assert "Not deactivated: a reason is required." in page
    assert _entries(app, "user_deactivate") == []
    with app.app_context():
        user = db.session.get(OperatorUser, sam)
        assert user.active and user.session_generation == 0


def test_the_store_refuses_a_deactivation_without_a_reason(app, console_user):
    console_user("sam", "viewer")
    sam = _user_id(app, "sam")
    with app.app_context(), pytest.raises(ActionRefused, match="a reason is required"):
        accounts.set_user_active(db.session, sam, False, actor="root", reason="  ")


def test_the_reason_of_one_deactivation_stays_with_it(app, console_client, console_user):
    console_user("sam", "viewer")
    admin = console_client("admin", "root")
    sam = _user_id(app, "sam")
    token = {"csrf_token": admin.csrf_token}
    admin.post(f"/users/{sam}/deactivate", data={**token, "reason": "first"})
    admin.post(f"/users/{sam}/activate", data=token)
    admin.post(f"/users/{sam}/deactivate", data={**token, "reason": "second"})
    assert [e.reason for e in _entries(app, "user_deactivate")] == ["first", "second"]
