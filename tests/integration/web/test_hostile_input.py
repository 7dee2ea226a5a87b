"""Every hostile input gets a 4xx with a clear message (or InvalidIntent), never a 500, and
changes nothing; on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from console.app import create_app
from console.events import webhook
from console.models import AuditEntry, Intent, OperatorUser, ProviderEvent, Suppression
from console.outbox import InvalidIntent, enqueue
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app

HUGE = "99999999999999999999999"


@pytest.fixture
def served(db_url):
    """The app as a server runs it: a failure is answered (500), not raised into the test."""
    app, _ = make_events_app(db_url, TESTING=False)
    yield app
    dispose(app)


@pytest.fixture
def admin(served, console_user_on):
    console_user_on(served, "root", "admin")
    return logged_in(served, "root")


@pytest.fixture
def console_user_on():
    from werkzeug.security import generate_password_hash

    from console.models import utcnow

    def create(app, username: str, role: str) -> int:
        with app.app_context():
            user = OperatorUser(
                username=username,
                password_hash=generate_password_hash("correct horse", method="pbkdf2:sha256:1000"),
                role=role,
                active=True,
                created_at=utcnow(),
            )
            db.session.add(user)
            db.session.commit()
            return user.id

    return create


def logged_in(app, username: str):
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = {"username": username, "password": "correct horse", "csrf_token": "t"}
    assert client.post("/login", data=form).status_code == 302
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    return client


def snapshot(app):
    with app.app_context():
        counts = [
            db.session.scalar(select(func.count()).select_from(table))
            for table in (Intent, Suppression, ProviderEvent, AuditEntry, OperatorUser)
        ]
        return counts


GETS = [
    ("/intents?q=%00", {400}),
    ("/intents?q=order%00", {400}),
    ("/intents?q=%ED%9F%BF", {200}),  # U+D7FF: a real character, just below the surrogates
    ("/intents?q=%EF%BF%BF", {200}),  # U+FFFF
    (f"/intents/{HUGE}", {404}),
    (f"/events/{HUGE}", {404}),
    ("/intents?after=99999999999999999999-1", {400}),
    ("/intents?after=1-99999999999999999999", {400}),
    ("/intents/export.csv?q=%00", {400}),
    ("/suppressions?q=%00", {400}),
    (f"/events?after={HUGE}", {200, 400}),
    ("/audit?q=%00", {400}),
]


@pytest.mark.parametrize("path,codes", GETS, ids=[path for path, _ in GETS])
def test_hostile_query_strings_and_ids_get_a_4xx(served, admin, path, codes):
    before = snapshot(served)
    response = admin.get(path)
    assert response.status_code in codes, (path, response.status_code)
    assert snapshot(served) == before


POSTS = [
    (f"/intents/{HUGE}/requeue", {"reason": "r"}),
    (f"/intents/{HUGE}/dead-letter", {"reason": "r"}),
    (f"/suppressions/{HUGE}/remove", {"reason": "r"}),
    (f"/users/{HUGE}/deactivate", {}),
    (f"/users/{HUGE}/password", {"password": "long enough pw"}),
    ("/suppressions", {"address": "eve\x00@example.com", "reason": "r"}),
    ("/suppressions", {"address": "eve@example.com", "reason": "asked\x00"}),
    ("/users", {"username": "ev\x00e", "password": "long enough pw", "role": "viewer"}),
    ("/account/password", {"current_password": "correct horse", "new_password": "ab\x00cdefgh"}),
]


@pytest.mark.parametrize("path,form", POSTS, ids=[f"{p} {sorted(f)}" for p, f in POSTS])
def test_hostile_forms_get_a_4xx_and_change_nothing(served, admin, path, form):
    before = snapshot(served)
    response = admin.post(path, data={**form, "csrf_token": "t"})
    assert 400 <= response.status_code < 500, (path, response.status_code)
    assert snapshot(served) == before


@pytest.mark.parametrize(
    "next_path", ["/intents\r\nSet-Cookie: x=1", "/\nX", "/\tX", "/\x7f", "/\\evil"]
)
def test_a_next_path_with_control_characters_goes_to_the_dashboard(
    served, console_user_on, next_path
):
    console_user_on(served, "ada", "viewer")
    client = served.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = {"username": "ada", "password": "correct horse", "csrf_token": "t", "next": next_path}
    response = client.post("/login", data=form)
    assert response.status_code == 302 and response.headers["Location"] == "/"


def signed_post(app, body: bytes):
    timestamp = str(int(time.time()))
    headers = {
        webhook.TIMESTAMP_HEADER: timestamp,
        webhook.SIGNATURE_HEADER: webhook.compute_signature(WEBHOOK_SECRET, timestamp, body),
    }
    return app.test_client().post("/webhooks/generic", data=body, headers=headers)


def event(**fields) -> bytes:
    base = {
        "id": "evt-1",
        "type": "bounced",
        "provider_message_id": "relay-42",
        "recipient": "ada@example.com",
        "bounce_type": "permanent",
        "occurred_at": "2025-01-31T12:00:00Z",
    }
    return json.dumps({**base, **fields}).encode()


DEEP = b"[" * 100_000 + b"]" * 100_000
WEBHOOK_BODIES = [
    ("nested 100,000 deep", DEEP),
    ("an object 100,000 deep", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
    ("a lone surrogate", event(recipient="\ud800@example.com")),
    ("NUL in the id", event(id="evt\x00-1")),
    ("NUL in the recipient", event(recipient="ada\x00@example.com")),
    ("a list for the type", event(type=["bounced"])),
    ("the end of time", event(occurred_at="9999-12-31T23:59:59-05:00")),
]


@pytest.mark.parametrize("what,body", WEBHOOK_BODIES, ids=[w for w, _ in WEBHOOK_BODIES])
def test_hostile_webhook_bodies_get_a_4xx_in_json(served, backend, what, body):
    before = snapshot(served)
    response = signed_post(served, body)
    assert 400 <= response.status_code < 500, response.status_code
    assert response.is_json and response.json["error"]
    assert snapshot(served) == before


SNS_BODIES = [
    ("nested 100,000 deep", DEEP),
    ("a list for the type", json.dumps({"Type": ["Notification"]}).encode()),
    ("not an object", b"[1, 2]"),
]


@pytest.mark.parametrize("what,body", SNS_BODIES, ids=[w for w, _ in SNS_BODIES])
def test_hostile_sns_bodies_get_a_4xx(served, what, body):
    before = snapshot(served)
    response = served.test_client().post("/webhooks/ses", data=body)
    assert 400 <= response.status_code < 500, (what, response.status_code)
    assert snapshot(served) == before


def _deep(levels: int) -> dict:
    root: dict = {}
    node = root
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return root


WELCOME = {"name": "Ada", "login_url": "https://shop.example.com/login"}
ENQUEUES = [
    ("params 3,000 deep", dict(key="k-1", params={**WELCOME, "extra": _deep(3000)})),
    ("NUL in the key", dict(key="order\x00-1")),
    ("NUL in a param", dict(key="k-2", params={**WELCOME, "name": "Ada\x00"})),
    ("NUL in a param's name", dict(key="k-3", params={**WELCOME, "na\x00me": "Ada"})),
    ("a lone surrogate in a param", dict(key="k-4", params={**WELCOME, "name": "\udc80"})),
    ("NUL in the event", dict(key="k-5", event="order:\x00")),
    ("NUL in the account", dict(key="k-6", recipient_account="reviewer:\x00")),
    ("a surrogate in the key", dict(key="k-\ud800")),
]


@pytest.mark.parametrize("what,fields", ENQUEUES, ids=[w for w, _ in ENQUEUES])
def test_enqueue_refuses_what_the_database_would_refuse(db_url, what, fields):
    app = create_app({"CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY})
    values = {"to": "ada@example.com", "template": "welcome", "params": WELCOME, **fields}
    with app.app_context():
        with pytest.raises(InvalidIntent, match="NUL|surrogate|nested"):
            enqueue(db.session, **values)
        db.session.flush()  # the session stays usable
        assert db.session.scalar(select(func.count()).select_from(Intent)) == 0
        enqueue(db.session, key="fine", to="ada@example.com", template="welcome", params=WELCOME)
        db.session.commit()
        db.engine.dispose()
