"""The role matrix: every console route for anonymous, viewer, operator and admin."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from console.models import AuditEntry, Intent, OperatorUser, Suppression, utcnow
from console.web.extensions import db

ROLE_RANK = {"anonymous": 0, "viewer": 1, "operator": 2, "admin": 3}
CONSOLE_BLUEPRINTS = ("auth", "account", "dashboard", "intents", "suppressions", "users", "audit")

# (endpoint, method, path template, form, least role)
ROUTES = [
    ("dashboard.index", "GET", "/", None, "viewer"),
    ("intents.search", "GET", "/intents?q=order", None, "viewer"),
    ("intents.detail", "GET", "/intents/{intent}", None, "viewer"),
    ("intents.preview", "POST", "/intents/{intent}/preview", {}, "operator"),
    ("intents.requeue", "POST", "/intents/{failed}/requeue", {"reason": "r"}, "operator"),
    ("intents.dead_letter", "POST", "/intents/{intent}/dead-letter", {"reason": "r"}, "operator"),
    (
        "intents.reconcile",
        "POST",
        "/intents/{ambiguous}/reconcile",
        {"reason": "r", "resolution": "accepted"},
        "operator",
    ),
    ("intents.ask_provider", "POST", "/intents/{ambiguous}/ask", {}, "operator"),
    ("intents.bulk_preview", "GET", "/intents/bulk?action=requeue&status=failed", None, "operator"),
    (
        "intents.bulk_apply",
        "POST",
        "/intents/bulk",
        {
            "action": "requeue",
            "status": "dead",
            "max_id": "{max_id}",
            "previewed_at": "{previewed_at}",
            "reason": "r",
        },
        "operator",
    ),
    ("suppressions.index", "GET", "/suppressions", None, "viewer"),
    (
        "suppressions.removed",
        "GET",
        "/suppressions/removed?recipient=a@example.com",
        None,
        "operator",
    ),
    (
        "suppressions.add",
        "POST",
        "/suppressions",
        {"address": "new@example.com", "reason": "r"},
        "operator",
    ),
    (
        "suppressions.remove",
        "POST",
        "/suppressions/{suppression}/remove",
        {"reason": "r"},
        "operator",
    ),
    (
        "suppressions.release",
        "POST",
        "/suppressions/release",
        {"recipient": "held@example.com", "reason": "r"},
        "operator",
    ),
    ("users.index", "GET", "/users", None, "admin"),
    (
        "users.create",
        "POST",
        "/users",
        {"username": "newbie", "password": "long enough", "role": "viewer"},
        "admin",
    ),
    ("users.deactivate", "POST", "/users/{other_user}/deactivate", {}, "admin"),
    ("users.activate", "POST", "/users/{inactive_user}/activate", {}, "admin"),
    ("users.set_role", "POST", "/users/{other_user}/role", {"role": "operator"}, "admin"),
    (
        "users.set_password",
        "POST",
        "/users/{other_user}/password",
        {"password": "long enough"},
        "admin",
    ),
    ("account.index", "GET", "/account", None, "viewer"),
    (
        "account.change_password",
        "POST",
        "/account/password",
        {
            "current_password": "correct horse",
            "new_password": "correct horse",
            "new_password_again": "correct horse",
        },
        "viewer",
    ),
    ("account.end_other_sessions", "POST", "/account/sessions/end", {}, "viewer"),
    ("audit.index", "GET", "/audit", None, "operator"),
]
OPEN_ENDPOINTS = {"auth.login", "auth.logout", "static", "ops.favicon"}


@pytest.fixture
def world(app, add_intent, console_user):
    """One intent in each state the routes act on, a suppression and two extra accounts."""
    ids = {
        "intent": add_intent("pending"),
        "failed": add_intent("failed", attempt_count=1),
        "ambiguous": add_intent("ambiguous", attempt_count=1),
    }
    add_intent("dead")
    with app.app_context():
        suppression = Suppression(
            recipient="gone@example.com", reason="manual", created_at=utcnow()
        )
        db.session.add(suppression)
        db.session.commit()
        ids["suppression"] = suppression.id
        ids["max_id"] = db.session.execute(select(func.max(Intent.id))).scalar()
    ids["previewed_at"] = utcnow().isoformat()
    ids["other_user"] = console_user("someone", "viewer")
    ids["inactive_user"] = console_user("former", "viewer", active=False)
    return ids


def _client_for(role, app, console_client):
    if role == "anonymous":
        client = app.test_client()
        client.get("/login")
        with client.session_transaction() as flask_session:
            flask_session["_csrf_token"] = "anonymous-token"
        client.csrf_token = "anonymous-token"
        return client
    return console_client(role)


def _snapshot(app):
    with app.app_context():
        return (
            db.session.execute(select(func.count()).select_from(AuditEntry)).scalar(),
            sorted(db.session.execute(select(Intent.id, Intent.status)).all()),
            db.session.execute(select(func.count()).select_from(Suppression)).scalar(),
            sorted(db.session.execute(select(OperatorUser.username, OperatorUser.active)).all()),
        )


def _request(client, method, path, form, world):
    path = path.format(**world)
    if method == "GET":
        return client.get(path)
    data = {key: value.format(**world) for key, value in form.items()}
    return client.post(path, data={**data, "csrf_token": client.csrf_token})


def test_every_console_route_is_in_the_matrix(app):
    covered = {endpoint for endpoint, *_ in ROUTES} | OPEN_ENDPOINTS
    console_endpoints = {
        rule.endpoint
        for rule in app.url_map.iter_rules()
        if rule.endpoint.split(".")[0] in CONSOLE_BLUEPRINTS
    }
    assert console_endpoints <= covered, console_endpoints - covered


@pytest.mark.parametrize("role", ["anonymous", "viewer", "operator", "admin"])
def test_role_matrix(role, app, console_client, world):
    client = _client_for(role, app, console_client)
    for endpoint, method, path, form, least_role in ROUTES:
        before = _snapshot(app)
        response = _request(client, method, path, form, world)
        allowed = ROLE_RANK[role] >= ROLE_RANK[least_role]
        where = f"{role} {endpoint} {method} {path} -> {response.status_code}"
        if role == "anonymous":
            assert response.status_code == 302, where
            assert response.headers["Location"].startswith("/login"), where
        elif not allowed:
            assert response.status_code == 403, where
        else:
            assert response.status_code in (200, 303), where
        if not allowed:
            assert _snapshot(app) == before, f"{where} changed something"


def test_viewer_sees_status_and_timeline_but_no_content_or_actions(app, console_client, add_intent):
    intent_id = add_intent("ambiguous", attempt_count=1)
    page = console_client("viewer").get(f"/intents/{intent_id}").text
    assert "ambiguous" in page and 'id="timeline"' in page
    assert "Business event order:1" in page
    for hidden in ("reconcile-form", "requeue-form", "dead-letter-form", "preview-form"):
        assert f'id="{hidden}"' not in page, hidden
    assert "Template parameters" not in page
    assert "000001" not in page  # the login code in the params


def test_operator_sees_the_actions_that_fit_the_status(app, console_client, add_intent):
    client = console_client("operator")
    expectations = {
        "ambiguous": {"reconcile-form"},  # its resend is the requeue
        "failed": {"requeue-form"},
        "pending": {"dead-letter-form"},
        "submitted": set(),
        "suppressed": set(),
    }
    every_form = {"reconcile-form", "requeue-form", "dead-letter-form"}
    for status, forms in expectations.items():
        page = client.get(f"/intents/{add_intent(status)}").text
        shown = {form for form in every_form if f'id="{form}"' in page}
        assert shown == forms, status
        assert 'id="preview-form"' in page
