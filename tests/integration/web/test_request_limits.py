"""Request bodies are bounded before anything reads them; HEAD is never a login."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import func, select

from console.app import create_app
from console.state_tables import LoginFailureCount
from console.web.extensions import db
from tests.conftest import TEST_SECRET_KEY
from tests.support.native_signers import native_settings, sendgrid_request
from tests.support.provider_payloads.sendgrid import sendgrid_batch

SMALL_LIMIT = 16 * 1024
FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def make_app(db_url):
    apps = []

    def make(**settings):
        config = {"CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY}
        app = create_app({**config, "TESTING": False, **settings})
        apps.append(app)
        return app

    yield make
    for app in apps:
        with app.app_context():
            db.engine.dispose()


class WatchedBody(io.BytesIO):
    """A request body that records whether anything read it."""

    def __init__(self, size: int) -> None:
        super().__init__(b"username=root&password=" + b"x" * size)
        self.was_read = False

    def read(self, *args):
        self.was_read = True
        return super().read(*args)

    def readline(self, *args):
        self.was_read = True
        return super().readline(*args)


def failures(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(LoginFailureCount))


def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(make_app):
    app = make_app(CONSOLE_MAX_REQUEST_BYTES=str(SMALL_LIMIT))
    body = WatchedBody(SMALL_LIMIT)
    response = app.test_client().post(
        "/login", input_stream=body, content_length=len(body.getvalue()), content_type=FORM
    )
    assert response.status_code == 413
    assert f"{SMALL_LIMIT} bytes" in response.text
    assert not body.was_read
    assert failures(app) == 0


def test_the_default_limit_is_one_megabyte(make_app):
    app = make_app()
    client = app.test_client()
    over = client.post("/login", data=b"a=" + b"x" * (1024 * 1024), content_type=FORM)
    assert over.status_code == 413
    under = client.post("/login", data=b"a=" + b"x" * (1000 * 1000), content_type=FORM)
    assert under.status_code == 400  # read, and refused for its missing CSRF token


def test_a_body_without_a_length_is_cut_at_the_limit(make_app):
    app = make_app(CONSOLE_MAX_REQUEST_BYTES=str(SMALL_LIMIT))
    body = WatchedBody(4 * SMALL_LIMIT)
    response = app.test_client().post(
        "/login",
        input_stream=body,
        content_type=FORM,
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert response.status_code == 413
    assert failures(app) == 0


def test_a_provider_batch_larger_than_the_console_limit_is_still_recorded(make_app):
    app = make_app(CONSOLE_MAX_REQUEST_BYTES=str(SMALL_LIMIT), **native_settings())
    batch = [
        {**event, "sg_event_id": f"{event['sg_event_id']}-{number}", "note": "n" * 500}
        for number in range(20)
        for event in sendgrid_batch()
    ]
    body, headers = sendgrid_request(batch)
    assert len(body) > 4 * SMALL_LIMIT
    response = app.test_client().post("/webhooks/sendgrid", data=body, headers=headers)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("password", ["correct horse", "wrong guess"])
def test_head_with_a_login_form_neither_logs_in_nor_counts_a_failure(
    make_app, console_user_on, password
):
    app = make_app()
    console_user_on(app, "root", "admin")
    client = app.test_client()
    form = {"username": "root", "password": password}
    response = client.open("/login", method="HEAD", data=form, content_type=FORM)
    assert response.status_code == 200
    assert client.get("/").status_code == 302  # still logged out
    assert failures(app) == 0


@pytest.fixture
def console_user_on():
    from werkzeug.security import generate_password_hash

    from console.models import OperatorUser, utcnow

    def create(app, username: str, role: str) -> None:
        with app.app_context():
            password_hash = generate_password_hash("correct horse", method="pbkdf2:sha256:1000")
            db.session.add(
                OperatorUser(
                    username=username,
                    password_hash=password_hash,
                    role=role,
                    active=True,
                    created_at=utcnow(),
                )
            )
            db.session.commit()

    return create
