"""A database error while recording an event or a suppression logs no personal data.

The errors are real: a SQLite file whose write lock another connection holds, and
on PostgreSQL a constraint the row violates (its DETAIL names the row's values).
"""

from __future__ import annotations

import io
import json
import logging
import re
import sqlite3
import time

import pytest
from sqlalchemy import text
from werkzeug.security import generate_password_hash

from console import logs
from console.events import webhook
from console.models import OperatorUser, utcnow
from console.web.extensions import db
from tests.support.provider_fixtures import WEBHOOK_SECRET, dispose, make_events_app

ADDRESS = "jane.private@example.com"
REASON = "Asked-By-Jane-Private-On-The-Phone"
DIAGNOSTIC = "smtp; 550 5.1.1 Mailbox-Of-Jane-Private unknown"
PAYLOAD_MARK = "payload-marker-7781-private"
PRIVATE = (ADDRESS, REASON, DIAGNOSTIC, PAYLOAD_MARK, "jane.private", "Jane-Private")


@pytest.fixture
def served(db_url):
    """A console app as served (exceptions logged, not raised), its logs captured as JSON."""
    app, _ = make_events_app(db_url, CONSOLE_DATABASE_LOCK_TIMEOUT_SECONDS="0.3", TESTING=False)
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logs.JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
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
    yield app, buffer
    root.removeHandler(handler)
    dispose(app)


def post_event(app, before_post=lambda: None):
    body = json.dumps(
        {
            "id": "evt-private-1",
            "type": "bounced",
            "provider_message_id": "relay-42",
            "recipient": ADDRESS,
            "bounce_type": "permanent",
            "diagnostic": DIAGNOSTIC,
            "occurred_at": "2025-01-31T12:00:00Z",
            "note": PAYLOAD_MARK,
        }
    ).encode()
    timestamp = str(int(time.time()))
    headers = {
        webhook.TIMESTAMP_HEADER: timestamp,
        webhook.SIGNATURE_HEADER: webhook.compute_signature(WEBHOOK_SECRET, timestamp, body),
    }
    before_post()
    return app.test_client().post("/webhooks/generic", data=body, headers=headers)


def add_suppression(app, before_post=lambda: None):
    client = app.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    form = {"username": "ops", "password": "correct horse", "csrf_token": token}
    assert client.post("/login", data=form).status_code == 302
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/suppressions").text)
    form = {"address": ADDRESS, "reason": REASON, "csrf_token": token.group(1)}
    before_post()
    return client.post("/suppressions", data=form)


def assert_nothing_private(buffer: io.StringIO, response) -> None:
    logged = buffer.getvalue()
    assert response.status_code >= 500, response.status_code
    assert logged.strip(), "the failure was logged"
    leaked = [value for value in PRIVATE if value in logged]
    assert leaked == [], logged


class WriteLock:
    """Another connection that takes the SQLite write lock and holds it until the test ends."""

    def __init__(self, url: str) -> None:
        self.connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

    def take(self) -> None:
        self.connection.execute("BEGIN IMMEDIATE")

    def close(self) -> None:
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")
        self.connection.close()


SENDERS = [post_event, add_suppression]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("send", SENDERS, ids=["webhook", "suppression"])
def test_a_locked_sqlite_database_logs_no_personal_data(served, db_url, send):
    app, buffer = served
    lock = WriteLock(db_url)
    try:
        response = send(app, lock.take)
    finally:
        lock.close()
    assert_nothing_private(buffer, response)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("send", SENDERS, ids=["webhook", "suppression"])
def test_a_violated_constraint_on_postgresql_logs_no_personal_data(served, send):
    app, buffer = served
    with app.app_context():  # a rule the rows break; its error's DETAIL lists the row
        for table, column in (("provider_event", "recipient"), ("suppression", "recipient")):
            db.session.execute(
                text(
                    f"ALTER TABLE {table} ADD CONSTRAINT no_jane_{table} "
                    f"CHECK ({column} NOT LIKE 'jane.%')"
                )
            )
        db.session.commit()
    response = send(app)
    assert_nothing_private(buffer, response)
