"""Rows written with plain SQL never put an unsafe header or envelope value on the wire."""

from __future__ import annotations

import itertools
import json

import pytest
from sqlalchemy import select, text

from console.models import Attempt, Intent
from console.transports.smtp import SmtpTransport
from console.vocabulary import FAILED, SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer

WELCOME = {"name": "Bob", "login_url": "https://shop.example/login"}
INJECTED = "\r\nBcc: attacker@evil.example"
_numbers = itertools.count(1)

# case -> (row values that differ from a safe welcome row, the field the reason names)
UNSAFE_ROWS = {
    "subject rendered with CR/LF": (
        {"params": {**WELCOME, "name": "Bob" + INJECTED}},
        "subject",
    ),
    "LF alone in a rendered subject": (
        {"params": {**WELCOME, "name": "Bob\nBcc: x@evil.example"}},
        "subject",
    ),
    "CR/LF in the recipient": ({"recipient": "victim@example.com" + INJECTED}, "recipient"),
    "two addresses in the recipient": (
        {"recipient": "Victim <victim@example.com>, attacker@evil.example"},
        "recipient",
    ),
    "CR/LF in the Message-ID": ({"message_id": "<m1@shop.example>" + INJECTED}, "message_id"),
    "a Message-ID without angle brackets": ({"message_id": "m2@shop.example"}, "message_id"),
    "a Message-ID without a domain": ({"message_id": "<m3>"}, "message_id"),
}


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer(stall_seconds=2.0) as server:
        yield server


@pytest.fixture
def smtp_worker(make_worker, smtp_server):
    return make_worker(SmtpTransport(smtp_server.url, connections=1, timeout_seconds=2.0))


def insert_row(engine, **values) -> int:
    """INSERT INTO email_intent as an application in another language would; return its id."""
    number = next(_numbers)
    row = {
        "idempotency_key": f"welcome:{number}",
        "message_id": f"<welcome-{number}@shop.example>",
        "recipient": f"user{number}@example.com",
        "params": WELCOME,
        **values,
    }
    row["params"] = json.dumps(row["params"])
    statement = text(
        "INSERT INTO email_intent (idempotency_key, message_id, recipient, template, params)"
        " VALUES (:idempotency_key, :message_id, :recipient, 'welcome', :params)"
    )
    with engine.begin() as connection:
        connection.execute(statement, row)
        found = connection.execute(
            text("SELECT id FROM email_intent WHERE idempotency_key = :key"),
            {"key": row["idempotency_key"]},
        )
        return found.scalar_one()


def load(session_factory, intent_id) -> tuple[Intent, list[Attempt]]:
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        query = select(Attempt).where(Attempt.intent_id == intent_id)
        return intent, list(session.scalars(query))


@pytest.mark.parametrize("case", list(UNSAFE_ROWS))
def test_an_unsafe_row_fails_naming_the_field_and_nothing_reaches_the_server(
    case, engine, session_factory, smtp_server, smtp_worker, clock
):
    values, field = UNSAFE_ROWS[case]
    intent_id = insert_row(engine, **values)

    assert smtp_worker.run_once().claimed == 1

    intent, [attempt] = load(session_factory, intent_id)
    assert intent.status == FAILED
    assert field in intent.status_reason, intent.status_reason
    assert attempt.outcome == "permanent" and attempt.stage == "claimed"
    assert smtp_server.received == [] and smtp_server.connections_opened == 0
    clock.advance(86400)
    assert smtp_worker.run_once().claimed == 0, "never retried"
    assert load(session_factory, intent_id)[0].attempt_count == 1


def test_safe_rows_in_the_same_batch_are_sent_unchanged(
    engine, session_factory, smtp_server, smtp_worker
):
    injected = insert_row(engine, params={**WELCOME, "name": "Bob" + INJECTED})
    safe = insert_row(engine, recipient="ada@example.com")

    assert smtp_worker.run_once().claimed == 2

    assert load(session_factory, injected)[0].status == FAILED
    sent, _ = load(session_factory, safe)
    assert sent.status == SUBMITTED
    assert [(r.recipient, r.message_id) for r in smtp_server.received] == [
        ("ada@example.com", sent.message_id)
    ]
