"""Hostile numbers and search text over every route that reads one: never a 5xx.

Each route gets every value of VALUES, on SQLite and on PostgreSQL, and must answer
what its row says: a number read from a request is ASCII digits within a BIGINT,
anything else is absent (a list's first page) or refused with a 4xx.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from urllib.parse import quote

import pytest
from sqlalchemy import select
from werkzeug.security import generate_password_hash

from console.app import create_app
from console.models import Intent, OperatorUser, utcnow
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY

CSRF = "hostile-routes-token"
BIGINT = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Value:
    label: str
    encoded: str  # as it travels in a query string or a form body
    number: int | None = None  # what a number field reads it as; None: not a number
    absent: bool = False


VALUES = [
    Value("superscript two", quote("²")),
    Value("circled one", quote("①")),
    Value("arabic-indic 12", quote("١٢")),
    Value("full-width 12", quote("１２")),
    Value("2**63", str(2**63)),
    Value("19 nines", "9" * 19),
    Value("30 digits", "1234567890" * 3),
    Value("largest bigint", str(BIGINT), number=BIGINT),
    Value("negative", "-1"),
    Value("empty", "", absent=True),
    Value("exponent", "1e3"),
    Value("leading space", "%201", number=1),
    Value("lone surrogate", "%ED%A0%80"),
    Value("hash superscript", quote("#²")),
    Value("one", "1", number=1),
]

Expect = Callable[[Value], int]


def always(code: int) -> Expect:
    return lambda value: code


def by_kind(*, number: int, bad: int, absent: int) -> Expect:
    def expect(value: Value) -> int:
        if value.absent:
            return absent
        return number if value.number is not None else bad

    return expect


def template_version(value: Value) -> int:
    """welcome has only v1: any other version, or no number, is not there (404)."""
    return 200 if value.absent or value.number == 1 else 404


def in_path(*, one: int, largest: int) -> Expect:
    """An id in the path: ASCII digits within a BIGINT, else no route (404); 1 exists."""
    return lambda value: {"1": one, str(BIGINT): largest}.get(value.encoded, 404)


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    path: str  # "{}" is the hostile value
    expect: Expect
    form: str = ""  # a form body; "{}" is the hostile value

    @property
    def label(self) -> str:
        return f"{self.method} {self.path} {self.form}".strip()


REQUEUE = Route("POST", "/intents/{intent}/requeue", always(303), form="reason=r&more_attempts={}")
PREVIEWED_AT = quote("2030-01-01T00:00:00+00:00")
ROUTES = [
    Route("GET", "/intents?q={}", always(200)),
    Route("GET", "/intents?q={}&status=failed", always(200)),
    Route("GET", "/intents/export.csv?q={}", always(200)),
    Route("GET", "/intents/export.jsonl?q={}", always(200)),
    Route("GET", "/intents/bulk?action=requeue&q={}", always(200)),
    Route("GET", "/suppressions?before={}", always(200)),
    Route("GET", "/suppressions?q={}", always(200)),
    Route("GET", "/events?before={}", always(200)),
    Route("GET", "/events/unmatched?before={}", always(200)),
    Route("GET", "/events?before={}&type=bounced", always(200)),
    Route("GET", "/templates/welcome?version={}", template_version),
    Route("GET", "/audit?intent={}", by_kind(number=200, bad=400, absent=200)),
    Route("GET", "/audit?before={}", by_kind(number=200, bad=400, absent=200)),
    Route("GET", "/intents/{}", in_path(one=200, largest=404)),
    Route("GET", "/events/{}", in_path(one=404, largest=404)),
    Route(
        "POST",
        "/intents/bulk",
        by_kind(number=303, bad=400, absent=400),
        form=f"action=requeue&reason=r&previewed_at={PREVIEWED_AT}&max_id={{}}",
    ),
    Route(
        "POST",
        "/intents/bulk",
        by_kind(number=303, bad=400, absent=400),
        form=f"action=dead_letter&reason=r&previewed_at={PREVIEWED_AT}&q={{}}&max_id={{}}",
    ),
    REQUEUE,
    Route("POST", "/intents/{}/requeue", in_path(one=303, largest=404), form="reason=r"),
    Route("POST", "/users/{}/deactivate", in_path(one=303, largest=303), form="reason=r"),
    Route("POST", "/holds", always(303), form="kind=template&value=welcome%40{}&reason=r"),
]


@pytest.fixture
def served(db_url):
    """The app as a server runs it: a fault is answered with 500, not raised into the test."""
    app = create_app(
        {"CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY, "TESTING": False}
    )
    with app.app_context():
        db.session.add(
            OperatorUser(
                username="root",
                password_hash=generate_password_hash("correct horse", method="pbkdf2:sha256:1000"),
                role="admin",
                active=True,
                created_at=utcnow(),
            )
        )
        db.session.commit()
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def admin(served):
    client = served.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = CSRF
    form = {"username": "root", "password": "correct horse", "csrf_token": CSRF}
    assert client.post("/login", data=form).status_code == 302
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = CSRF
    return client


@pytest.fixture
def failed_intent(served):
    from console.outbox import enqueue

    with served.app_context():
        intent = enqueue(
            db.session,
            key="order:1:confirmation",
            event="order:1",
            to="ada@example.com",
            template="login-code",
            params={"code": "000001"},
        )
        db.session.flush()
        intent.status = "failed"
        db.session.commit()
        return intent.id


def ask(client, route: Route, value: Value, intent_id: int):
    path = route.path.replace("{}", value.encoded).replace("{intent}", str(intent_id))
    if route.method == "GET":
        response = client.get(path)
        response.get_data()  # an export streams: read it to the end
        return response
    body = f"{route.form.replace('{}', value.encoded)}&csrf_token={CSRF}"
    return client.post(path, data=body, content_type="application/x-www-form-urlencoded")


@pytest.mark.parametrize("route", ROUTES, ids=[route.label for route in ROUTES])
def test_hostile_values_get_the_answer_their_route_gives(admin, failed_intent, route):
    wrong = {}
    for value in VALUES:
        status = ask(admin, route, value, failed_intent).status_code
        if status != route.expect(value):
            wrong[value.label] = status
    expected = {label: route.expect(v) for v in VALUES for label in [v.label] if label in wrong}
    assert wrong == {}, f"{route.label} answered {wrong}, expected {expected}"


def test_a_hostile_number_of_more_attempts_requeues_nothing(served, admin, failed_intent):
    for value in VALUES:
        if value.number is None:
            assert ask(admin, REQUEUE, value, failed_intent).status_code == 303
    with served.app_context():
        status = db.session.scalar(select(Intent.status).where(Intent.id == failed_intent))
    assert status == "failed"
