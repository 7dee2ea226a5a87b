"""Every value a page shows is worded: no Python boolean, no one-use token, no URL-encoded
text, no address re-capitalised, and the lists give a relative time beside each moment."""

from __future__ import annotations

import datetime as dt
import html
import re

from console.models import utcnow


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def post(client, path: str, **form):
    return client.post(path, data={"csrf_token": client.csrf_token, **form})


def test_a_bulk_requeue_reads_as_words_on_the_intents_timeline(app, console_client, add_intent):
    client = console_client("operator", "olga")
    intent_id = add_intent("failed", event="campaign:1")
    preview = client.get("/intents/bulk?action=requeue&q=campaign").text
    form = {
        name: value
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', preview)
    }
    assert post(client, "/intents/bulk", **{**form, "reason": "relay back"}).status_code == 303
    said = text_of(client.get(f"/intents/{intent_id}").text)
    assert "Operator: requeue" in said and "in bulk, over a search's results" in said
    assert "bulk True" not in said and "True" not in said
    assert not re.search(r"preview [A-Za-z0-9_-]{12,}", said)


def test_an_exports_audit_entry_reads_the_search_as_typed(app, console_client, add_intent):
    add_intent("submitted", event="order:1001")
    console_client("viewer", "vera").get("/intents/export.csv?q=order:100").get_data()
    audit = text_of(console_client("admin").get("/audit").text)
    assert "order%3A" not in audit
    assert "CSV of the search “order:100”" in audit.replace(": ", ":")


def test_a_second_suppression_names_the_address_as_typed(app, console_client):
    client = console_client("operator")
    assert (
        post(client, "/suppressions", address="new.person@example.com", reason="asked").status_code
        == 303
    )
    again = post(client, "/suppressions", address="new.person@example.com", reason="again")
    said = text_of(again.text)
    assert "new.person@example.com is already on the suppression list" in said
    assert "New.person@example.com" not in said


def test_the_lists_say_how_long_ago_each_intent_was_created(console_client, add_intent):
    intent_id = add_intent("failed", created_at=utcnow() - dt.timedelta(minutes=7))
    page = console_client("viewer").get("/intents").text
    row = re.search(rf'<tr id="intent-{intent_id}".*?</tr>', page, re.DOTALL).group(0)
    assert "7 min ago" in text_of(row)
