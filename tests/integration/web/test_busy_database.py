"""A busy or unreachable database answers 503 with Retry-After in seconds, and changes nothing."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import time

import pytest
from sqlalchemy import create_engine, func, select, text
from werkzeug.security import generate_password_hash

from console.events import webhook
from console.models import OperatorUser, Suppression, utcnow
from console.web.extensions import db
from tests.support.pgcluster import free_port
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app

LOCK_TIMEOUT_SECONDS = 0.5
FAST_ENOUGH_SECONDS = 4.0  # the lock timeout, a loaded machine's slack; never the old 30 s


@pytest.fixture
def served(db_url):
    """The app as served (errors answered, not raised), with a short lock timeout."""
    app, _ = make_events_app(
        db_url, CONSOLE_DATABASE_LOCK_TIMEOUT_SECONDS=str(LOCK_TIMEOUT_SECONDS), TESTING=False
    )
    with app.app_context():
        db.session.add(
            OperatorUser(
                username="ops",
                password_hash=generate_password_hash("correct horse", method="pbkdf2:sha256:1000"),
                role="operator",
                active=True,
                created_at=utcnow(),
            )
        )
        db.session.commit()
    yield app
    dispose(app)


def logged_in(app):
    client = app.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    form = {"username": "ops", "password": "correct horse", "csrf_token": token}
    assert client.post("/login", data=form).status_code == 302
    page = client.get("/suppressions")
    client.csrf_token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    return client


def event_request(app):
    body = json.dumps(
        {
            "id": "evt-busy-1",
            "type": "bounced",
            "provider_message_id": "relay-42",
            "recipient": "ada@example.com",
            "bounce_type": "permanent",
            "diagnostic": "smtp; 550 5.1.1 user unknown",
            "occurred_at": "2025-01-31T12:00:00Z",
        }
    ).encode()
    timestamp = str(int(time.time()))
    headers = {
        webhook.TIMESTAMP_HEADER: timestamp,
        webhook.SIGNATURE_HEADER: webhook.compute_signature(WEBHOOK_SECRET, timestamp, body),
    }
    return app.test_client().post("/webhooks/generic", data=body, headers=headers)


def timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def assert_busy_page(response, elapsed):
    assert response.status_code == 503, response.status_code
    assert int(response.headers["Retry-After"]) >= 1
    assert elapsed < FAST_ENOUGH_SECONDS, elapsed


def suppressions(app) -> int:
    with app.app_context():
        return db.session.scalar(select(func.count()).select_from(Suppression))


class SqliteWriteLock:
    def __init__(self, url: str) -> None:
        self.connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        self.connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.connection.execute("ROLLBACK")
        self.connection.close()


class PostgresTableLock:
    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.connection = self.engine.connect()
        self.connection.execute(text("LOCK TABLE suppression, provider_event IN EXCLUSIVE MODE"))

    def release(self) -> None:
        self.connection.rollback()
        self.connection.close()
        self.engine.dispose()


def hold_lock(db_url):
    return SqliteWriteLock(db_url) if db_url.startswith("sqlite") else PostgresTableLock(db_url)


def test_a_held_lock_makes_a_console_write_a_fast_503_page(served, db_url):
    client = logged_in(served)
    lock = hold_lock(db_url)
    try:
        form = {"address": "eve@example.com", "reason": "asked", "csrf_token": client.csrf_token}
        response, elapsed = timed(lambda: client.post("/suppressions", data=form))
        assert_busy_page(response, elapsed)
        assert "text/html" in response.headers["Content-Type"]
        assert "database is busy" in response.text and "Outbox console" in response.text
        reading, elapsed = timed(lambda: client.get("/suppressions"))
        assert reading.status_code == 200 and elapsed < FAST_ENOUGH_SECONDS, "reads go on"
    finally:
        lock.release()
    assert suppressions(served) == 0
    response = client.post("/suppressions", data=form)
    assert response.status_code == 303, "once the lock is gone, the same form works"


def test_a_held_lock_makes_a_webhook_a_fast_503_in_json(served, db_url):
    lock = hold_lock(db_url)
    try:
        response, elapsed = timed(lambda: event_request(served))
    finally:
        lock.release()
    assert_busy_page(response, elapsed)
    assert response.is_json and "retry" in response.json["error"]
    assert event_request(served).status_code == 200, "the provider's redelivery is recorded"


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never says a word (a hung database host)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize("where", ["stopped", "silent"])
def test_an_unreachable_postgresql_is_a_fast_503(where, silent_server, monkeypatch, tmp_path):
    from console.app import create_app
    from tests.conftest import TEST_SECRET_KEY

    monkeypatch.setattr("console.store.database.CONNECT_TIMEOUT_SECONDS", 1)
    port = free_port() if where == "stopped" else silent_server
    app = create_app(
        {
            "CONSOLE_DATABASE_URL": f"postgresql://console@127.0.0.1:{port}/console",
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "CONSOLE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        }
    )
    client = app.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    form = {"username": "ops", "password": "correct horse", "csrf_token": token}
    response, elapsed = timed(lambda: client.post("/login", data=form))
    assert_busy_page(response, elapsed)
    response, elapsed = timed(lambda: event_request(app))
    assert_busy_page(response, elapsed)
    assert response.is_json
    dispose(app)
