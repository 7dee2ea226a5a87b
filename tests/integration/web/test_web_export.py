"""Export of a search: CSV and JSON Lines, streamed, same query string as /intents, audited."""

from __future__ import annotations

import csv
import io
import json

import pytest
from sqlalchemy import select

from console.models import AuditEntry
from console.web.extensions import db


@pytest.fixture
def intents(add_intent):
    """Five order intents: three failed (order:1..3), two submitted; the newest last."""
    ids = [
        add_intent("failed", key=f"order:{n}:confirmation", event=f"order:{n}") for n in (1, 2, 3)
    ]
    ids += [
        add_intent("submitted", key=f"order:{n}:confirmation", event=f"order:{n}") for n in (4, 5)
    ]
    return ids


def read_csv(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))


def test_operator_exports_a_search_as_csv_with_a_header_row_in_search_order(
    console_client, intents
):
    client = console_client("operator")
    response = client.get("/intents/export.csv?status=failed")
    assert response.status_code == 200
    assert response.is_streamed
    assert response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    assert ".csv" in response.headers["Content-Disposition"]
    rows = read_csv(response)
    assert [int(row["id"]) for row in rows] == list(reversed(intents[:3]))
    first = rows[0]
    assert first["status"] == "failed" and first["event"] == "order:3"
    assert first["recipient"] == "ada@example.com" and first["template"] == "login-code"
    assert json.loads(first["params"]) == {"code": "000003"}
    assert first["created_at"].endswith("+00:00")


def test_jsonl_takes_the_same_query_string_as_search(console_client, intents):
    client = console_client("operator")
    response = client.get("/intents/export.jsonl?q=order:4")
    assert response.status_code == 200 and response.is_streamed
    lines = response.get_data(as_text=True).splitlines()
    records = [json.loads(line) for line in lines]
    assert [record["id"] for record in records] == [intents[3]]
    assert records[0]["params"] == {"code": "000004"}
    assert records[0]["status"] == "submitted"


def test_viewer_export_has_no_params_or_content(console_client, intents):
    client = console_client("viewer")
    as_csv = client.get("/intents/export.csv")
    assert as_csv.status_code == 200
    text = as_csv.get_data(as_text=True)
    header = text.splitlines()[0].split(",")
    assert "params" not in header and "id" in header
    assert "00000" not in text, "no parameter value reaches a viewer"
    as_jsonl = client.get("/intents/export.jsonl").get_data(as_text=True)
    assert all("params" not in json.loads(line) for line in as_jsonl.splitlines())
    assert "00000" not in as_jsonl


def test_every_export_is_audited(app, console_client, intents):
    client = console_client("viewer", "vera")
    client.get("/intents/export.csv?status=failed").get_data()
    client.get("/intents/export.jsonl?q=order:").get_data()
    with app.app_context():
        entries = db.session.scalars(select(AuditEntry).where(AuditEntry.action == "export")).all()
    assert [entry.actor for entry in entries] == ["vera", "vera"]
    assert entries[0].details["format"] == "csv"
    assert entries[0].details["filters"] == {"status": "failed"}
    assert entries[0].details["with_params"] is False
    assert entries[0].target == "CSV of status failed"
    assert entries[1].details["format"] == "jsonl"


def test_export_walks_every_page(app, console_client, add_intent, monkeypatch):
    monkeypatch.setattr("console.store.intent_export.BATCH_SIZE", 7)
    ids = [add_intent("pending", key=f"batch:{n:03d}", event=f"batch:{n:03d}") for n in range(23)]
    client = console_client("operator")
    rows = read_csv(client.get("/intents/export.csv?q=batch:"))
    assert [int(row["id"]) for row in rows] == ids  # prefix matches in key order
    newest_first = read_csv(client.get("/intents/export.csv"))
    assert [int(row["id"]) for row in newest_first] == list(reversed(ids))


def test_spreadsheet_formulas_are_not_exported_as_formulas(console_client, add_intent):
    add_intent("pending", key='=HYPERLINK("http://x")', event="=cmd")
    rows = read_csv(console_client("operator").get("/intents/export.csv"))
    assert rows[0]["idempotency_key"].startswith("'=")
    assert rows[0]["event"] == "'=cmd"


def test_a_bad_filter_is_refused(console_client):
    client = console_client("operator")
    assert client.get("/intents/export.csv?status=lost").status_code == 400
    assert client.get("/intents/export.jsonl?age=forever").status_code == 400


def test_the_search_page_offers_the_export_of_its_search(console_client, intents):
    page = console_client("viewer").get("/intents?q=order:&status=failed").text
    assert 'href="/intents/export.csv?q=order:&amp;status=failed"' in page
    assert 'href="/intents/export.jsonl?q=order:&amp;status=failed"' in page


def test_export_needs_a_login(app):
    response = app.test_client().get("/intents/export.csv")
    assert response.status_code in (302, 401)
