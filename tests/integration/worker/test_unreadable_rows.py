"""A row the worker cannot read fails alone: the batch around it is sent, its pages render.

Rows are written with plain SQL, as an application in another language would, beside
good ones; the worker sends to a real SMTP server, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import json

import pytest
from sqlalchemy import select, text

from console.models import Attempt, Intent
from console.transports.smtp import SmtpTransport
from console.vocabulary import FAILED, SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer

WELCOME = json.dumps({"name": "Bob", "login_url": "https://shop.example/login"})
GOOD_ROWS = 30
_numbers = itertools.count(1)

# case -> (column values of the row, as SQL text; the field its failure names)
BAD_ROWS = {
    "params nested too deep": ({"params": "[" * 1200 + "]" * 1200}, "params"),
    "params a JSON array": ({"params": "[1, 2]"}, "params"),
    "params a JSON string": ({"params": '"Bob"'}, "params"),
    "params a JSON number": ({"params": "42"}, "params"),
    "an unknown template": ({"template": "no-such-template"}, "template"),
    "an unknown template version": ({"template_version": 99}, "template"),
    "two recipients": ({"recipient": "two@example.com, three@example.com"}, "recipient"),
    "a recipient without a domain": ({"recipient": "nobody"}, "recipient"),
    "a recipient with two at signs": ({"recipient": "a@b@example.com"}, "recipient"),
    "a recipient with a bad IDN domain": ({"recipient": "x@xn--zz.example"}, "recipient"),
    "a recipient with a long domain": ({"recipient": "x@" + "a" * 300 + ".com"}, "recipient"),
    "a Message-ID compose refuses": ({"message_id": "no-brackets@shop.example"}, "message_id"),
}
# SQLite stores any text in the params column; PostgreSQL's json type refuses it on insert.
SQLITE_ONLY_ROWS = {
    "params not JSON": ({"params": "{not json"}, "params"),
    "params cut off": ({"params": '{"name": "Bo'}, "params"),
}


def insert_row(engine, **values) -> int:
    """INSERT INTO email_intent with plain SQL; return the row's id."""
    number = next(_numbers)
    row = {
        "idempotency_key": f"welcome:{number}",
        "message_id": f"<welcome-{number}@shop.example>",
        "recipient": f"user{number}@example.com",
        "template": "welcome",
        "template_version": 1,
        "params": WELCOME,
        **values,
    }
    statement = text(
        "INSERT INTO email_intent"
        " (idempotency_key, message_id, recipient, template, template_version, params)"
        " VALUES (:idempotency_key, :message_id, :recipient, :template, :template_version,"
        " :params)"
    )
    with engine.begin() as connection:
        connection.execute(statement, row)
        found = connection.execute(
            text("SELECT id FROM email_intent WHERE idempotency_key = :key"),
            {"key": row["idempotency_key"]},
        )
        return found.scalar_one()


def bad_rows_for(engine) -> dict:
    if engine.dialect.name == "sqlite":
        return {**BAD_ROWS, **SQLITE_ONLY_ROWS}
    return BAD_ROWS


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


@pytest.fixture
def rows(engine):
    """Thirty good rows with every kind of bad row among them: (good ids, {case: bad id})."""
    good = [insert_row(engine) for _ in range(GOOD_ROWS // 2)]
    bad = {case: insert_row(engine, **values) for case, (values, _) in bad_rows_for(engine).items()}
    good += [insert_row(engine) for _ in range(GOOD_ROWS - len(good))]
    return good, bad


def test_every_good_row_goes_in_the_first_batch_and_each_bad_one_fails_alone(
    engine, session_factory, make_worker, smtp_server, rows, clock
):
    good, bad = rows
    worker = make_worker(
        SmtpTransport(smtp_server.url, timeout_seconds=2.0), batch_size=len(good) + len(bad)
    )

    result = worker.run_once()

    assert result.claimed == len(good) + len(bad)
    with session_factory() as session:
        statuses = dict(session.execute(select(Intent.id, Intent.status)).all())
        assert {statuses[i] for i in good} == {SUBMITTED}
        assert len(smtp_server.received) == GOOD_ROWS
        for case, intent_id in bad.items():
            intent = session.get(Intent, intent_id)
            field = bad_rows_for(engine)[case][1]
            assert intent.status == FAILED, case
            assert field in intent.status_reason, (case, intent.status_reason)
            attempts = session.scalars(select(Attempt).where(Attempt.intent_id == intent_id))
            assert [a.outcome for a in attempts] == ["permanent"], case
    clock.advance(86400)
    assert worker.run_once().claimed == 0, "a bad row is never tried again"


def test_the_pages_of_an_unreadable_row_render(app, engine, console_client, rows):
    good, bad = rows
    client = console_client("operator")

    for case, intent_id in bad.items():
        page = client.get(f"/intents/{intent_id}")
        assert page.status_code == 200, case
    unreadable = bad.get("params not JSON") or bad["params nested too deep"]
    assert "unreadable" in client.get(f"/intents/{unreadable}").text
    preview = client.post(
        f"/intents/{unreadable}/preview",
        data={"csrf_token": client.csrf_token},
        headers={"HX-Request": "true"},
    )
    assert preview.status_code == 200 and "cannot be rendered" in preview.text

    assert client.get("/").status_code == 200
    exported = client.get("/intents/export.csv?q=")
    assert exported.status_code == 200
    lines = exported.text.strip().splitlines()
    assert len(lines) == 1 + len(good) + len(bad), "the export is complete"
    jsonl = client.get("/intents/export.jsonl?q=")
    assert len(jsonl.text.strip().splitlines()) == len(good) + len(bad)
    for line in jsonl.text.strip().splitlines():
        json.loads(line)
