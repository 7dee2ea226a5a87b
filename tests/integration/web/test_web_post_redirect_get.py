"""Post/redirect/get: every form of the console, done or refused, answers a 303 to a GET page.

The page it leads to shows what happened, so a reload reads that page and never
asks to send the form again. A stale action keeps its 409 (the public contract),
and a refused login its 401; their pages name the GET address they stand for.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

from console.models import OperatorUser, Suppression, utcnow
from console.store import holds
from console.web.extensions import db


def post(client, path: str, **form):
    return client.post(path, data={**form, "csrf_token": client.csrf_token})


def lands_on(client, response, path: str, message: str) -> str:
    """Assert a 303 to the GET page `path` that says `message`; return that page."""
    assert response.status_code == 303, (response.status_code, response.text[:300])
    assert urlsplit(response.location).path == path
    page = client.get(response.location)
    assert page.status_code == 200
    assert message in page.text, page.text[-1500:]
    return page.text


def user_id(app, username: str) -> int:
    with app.app_context():
        query = select(OperatorUser.id).filter_by(username=username)
        return db.session.execute(query).scalar_one()


def test_own_account_forms(console_client):
    client = console_client("viewer", "ada")
    refused = post(client, "/account/password", current_password="wrong", new_password="x" * 9,
                   new_password_again="x" * 9)  # fmt: skip
    lands_on(client, refused, "/account", "Not changed:")
    done = post(client, "/account/password", current_password="correct horse",
                new_password="new password 1", new_password_again="new password 1")  # fmt: skip
    lands_on(client, done, "/account", "Your password is changed")
    ended = post(client, "/account/sessions/end")
    lands_on(client, ended, "/account", "Your other sessions have ended.")


def test_users_forms(app, console_client, console_user):
    admin = console_client("admin", "root")
    console_user("sam", "viewer")
    sam = user_id(app, "sam")
    cases = [
        ("/users", dict(username="bob", password="short", role="viewer"), "Not created:"),
        (
            "/users",
            dict(username="bob", password="long enough", role="viewer"),
            "Created viewer bob.",
        ),
        (f"/users/{sam}/deactivate", dict(reason=" "), "Not deactivated: a reason is required."),
        (f"/users/{sam}/deactivate", dict(reason="left"), "sam is deactivated"),
        ("/users/999/activate", {}, "Not reactivated: user 999 does not exist."),
        (f"/users/{sam}/activate", {}, "sam is active."),
        (f"/users/{sam}/role", dict(role="god"), "Role not changed:"),
        (f"/users/{sam}/role", dict(role="operator"), "sam is now operator"),
        (f"/users/{sam}/password", dict(password="short"), "Password not changed:"),
        (f"/users/{sam}/password", dict(password="long enough"), "sam has a new password"),
    ]
    for path, form, message in cases:
        lands_on(admin, post(admin, path, **form), "/users", message)


def test_suppression_forms(app, console_client, add_intent):
    client = console_client("operator", "olga")
    refused = post(client, "/suppressions", address="not an address", reason="x")
    lands_on(client, refused, "/suppressions", "Not suppressed:")
    done = post(client, "/suppressions", address="eve@example.com", reason="asked")
    lands_on(client, done, "/suppressions", "eve@example.com is suppressed.")
    with app.app_context():
        suppression_id = db.session.execute(select(Suppression.id)).scalar_one()
    add_intent("suppressed", to="eve@example.com")
    no_reason = post(client, f"/suppressions/{suppression_id}/remove", reason="")
    lands_on(client, no_reason, "/suppressions", "Not removed: a reason is required.")
    removed = post(client, f"/suppressions/{suppression_id}/remove", reason="resubscribed")
    page = lands_on(client, removed, "/suppressions/removed", "is no longer suppressed.")
    assert "held back <strong>1</strong> intent for this address" in page
    no_reason = post(client, "/suppressions/release", recipient="eve@example.com", reason="")
    lands_on(client, no_reason, "/suppressions", "Nothing was requeued:")
    released = post(client, "/suppressions/release", recipient="eve@example.com", reason="ok")
    lands_on(client, released, "/intents", "Requeued 1 intent for eve@example.com.")


def test_hold_forms(app, console_client):
    client = console_client("operator", "olga")
    refused = post(client, "/holds", kind="lane", value="bulk", reason="")
    lands_on(client, refused, "/holds", "Not held: a reason is required.")
    done = post(client, "/holds", kind="lane", value="bulk", reason="relay limits")
    lands_on(client, done, "/holds", "is held")
    with app.app_context():
        [line] = holds.holds_in_force(db.session, utcnow())
    released = post(client, f"/holds/{line.hold.id}/release", reason="fine again")
    lands_on(client, released, "/holds", "is released: 0 intents due now.")


def test_erasure_forms(console_client, add_intent):
    admin = console_client("admin", "dpo")
    add_intent("submitted", to="erin@example.com")
    refused = post(admin, "/erasure/preview", address="erin@example.com", reason="")
    lands_on(admin, refused, "/erasure", "No preview: a reason is required.")
    previewed = post(admin, "/erasure/preview", address="erin@example.com", reason="ticket 3")
    lands_on(admin, previewed, "/erasure", 'id="erasure-preview"')
    refused = post(admin, "/erasure", address="erin@example.com", reason="")
    lands_on(admin, refused, "/erasure", "Not erased: a reason is required.")
    done = post(admin, "/erasure", address="erin@example.com", reason="ticket 3")
    lands_on(admin, done, "/erasure", "deleted 1 intent")


@pytest.mark.parametrize(
    ("action", "status", "form", "message"),
    [
        ("requeue", "failed", {}, "Requeued: failed → pending."),
        ("dead-letter", "pending", {}, "Dead-lettered"),
        ("reconcile", "ambiguous", {"resolution": "accepted"}, "Marked accepted"),
    ],
)
def test_intent_action_forms(console_client, add_intent, action, status, form, message):
    client = console_client("operator", "olga")
    intent_id = add_intent(status)
    path = f"/intents/{intent_id}"
    refused = post(client, f"{path}/{action}", reason=" ", **form)
    lands_on(client, refused, path, "Nothing was done: a reason is required.")
    done = post(client, f"{path}/{action}", reason="checked", **form)
    lands_on(client, done, path, message)


def test_preview_and_bulk_forms(console_client, add_intent):
    client = console_client("operator", "olga")
    intent_id = add_intent("pending")
    previewed = post(client, f"/intents/{intent_id}/preview")
    lands_on(client, previewed, f"/intents/{intent_id}", "Message preview")
    failed = add_intent("failed", event="campaign:1")
    bulk = dict(action="requeue", q="campaign", max_id=str(failed),
                previewed_at=utcnow().isoformat())  # fmt: skip
    refused = post(client, "/intents/bulk", reason="", **bulk)
    lands_on(client, refused, "/intents/bulk", "Nothing was done: a reason is required.")
    done = post(client, "/intents/bulk", reason="relay back", **bulk)
    lands_on(client, done, "/intents", "Requeued 1 intent.")


def test_a_stale_action_keeps_its_409_and_names_its_get_page(console_client, add_intent):
    client = console_client("operator", "olga")
    intent_id = add_intent("failed")
    form = dict(reason="again", expected_status="failed")
    assert post(client, f"/intents/{intent_id}/requeue", **form).status_code == 303
    stale = post(client, f"/intents/{intent_id}/requeue", **form)
    assert stale.status_code == 409
    assert f'<meta name="console-get-url" content="/intents/{intent_id}">' in stale.text
    assert "console-get-url" not in client.get(f"/intents/{intent_id}").text


def test_a_refused_login_keeps_its_401_and_names_get_login(app, console_user):
    console_user("ada", "viewer")
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = dict(username="ada", password="wrong", csrf_token="t", next="/events")
    refused = client.post("/login", data=form)
    assert refused.status_code == 401
    assert '<meta name="console-get-url" content="/login?next=/events">' in refused.text
