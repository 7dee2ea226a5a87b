"""The erasure form: admins only, a preview that changes nothing, then the erasure itself."""

from __future__ import annotations

from sqlalchemy import select

from console.core.address_hash import address_hash
from console.models import AuditEntry, Intent, Suppression, utcnow
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY
from tests.support.erasure_checks import files_holding, places_holding

ADDRESS = "erin@example.com"
TOKEN = address_hash(TEST_SECRET_KEY, ADDRESS)


def fail_a_login(app, username: str) -> None:
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "login-form-token"
    form = {"username": username, "password": "wrong", "csrf_token": "login-form-token"}
    assert client.post("/login", data=form).status_code != 302


def post(client, path: str, **data):
    return client.post(path, data={**data, "csrf_token": client.csrf_token})


def test_only_admins_see_and_use_the_form(console_client):
    for role in ("viewer", "operator"):
        client = console_client(role)
        assert client.get("/erasure").status_code == 403
        assert client.get("/suppressions").status_code == 200
        assert "Erase an address" not in client.get("/suppressions").text
        response = post(client, "/erasure", address=ADDRESS, reason="r", cancel="1")
        assert response.status_code == 403
    admin = console_client("admin")
    assert "Erase an address" in admin.get("/suppressions").text
    assert admin.get("/erasure").status_code == 200
    no_token = admin.post("/erasure", data={"address": ADDRESS, "reason": "r"})
    assert no_token.status_code == 400


def test_the_preview_shows_what_goes_and_the_confirmation_erases(app, console_client, add_intent):
    sent = add_intent("submitted", to=ADDRESS)
    pending = add_intent("pending", to="Erin@Example.com")
    kept = add_intent("submitted", to="ada@example.com")
    with app.app_context():
        db.session.add(Suppression(recipient=ADDRESS, reason="manual", note="asked",
                                   created_at=utcnow()))  # fmt: skip
        db.session.commit()
    admin = console_client("admin", "dpo")

    preview = post(admin, "/erasure/preview", address=ADDRESS.upper(), reason="ticket 12")
    assert (preview.status_code, preview.location) == (303, "/erasure"), "post/redirect/get"
    page = admin.get("/erasure").text
    assert 'id="erasure-preview"' in page and TOKEN in page
    assert f">{pending}</a> (pending)" in page and "Cancel the 1 unsent intent first" in page
    assert ADDRESS not in preview.location.lower(), "the address stays out of the URL"
    with app.app_context():
        assert db.session.get(Intent, sent) is not None  # a preview changes nothing

    refused = post(admin, "/erasure", address=ADDRESS, reason="ticket 12")
    assert (refused.status_code, refused.location) == (303, "/erasure")
    page = admin.get("/erasure").text
    assert "Not erased:" in page and f"{pending} (pending)" in page
    no_reason = post(admin, "/erasure/preview", address=ADDRESS, reason=" ")
    assert (no_reason.status_code, no_reason.location) == (303, "/erasure")
    page = admin.get("/erasure").text
    assert "a reason is required" in page and 'id="erasure-preview"' not in page
    assert 'id="erasure-form"' in page and f'value="{ADDRESS}"' in page
    assert 'id="erasure-form"' in admin.get("/erasure?new=1").text

    export = admin.get("/intents/export.csv", query_string={"q": "Erin@Example.com"})
    assert export.status_code == 200 and export.get_data()
    fail_a_login(app, "Erin@Example.com")
    with app.app_context():
        held = set(places_holding(db.engine, ADDRESS))
        assert {"audit_entry.target", "login_failure_count.username"} <= held

    done = post(admin, "/erasure", address=ADDRESS, reason="ticket 12", cancel="1")
    assert done.status_code == 303
    shown = admin.get(done.headers["Location"]).text
    assert f"forgot {TOKEN}: deleted 2 intents (1 cancelled first)" in shown
    with app.app_context():
        assert set(db.session.scalars(select(Intent.id))) == {kept}
        assert db.session.scalars(select(Suppression.recipient)).all() == [TOKEN]
        entry = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "forget")).one()
        assert (entry.actor, entry.target, entry.reason) == ("dpo", TOKEN, "ticket 12")
        assert places_holding(db.engine, ADDRESS) == []
        if db.engine.dialect.name == "sqlite":
            assert files_holding(db.engine, ADDRESS) == []
