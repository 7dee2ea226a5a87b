"""Every value a page shows is worded: no Python boolean, no one-use token, no URL-encoded
text, no address re-capitalised, and the lists give a relative time beside each moment."""

from __future__ import annotations

import datetime as dt
import html
import re

from sqlalchemy import select

from console.demo.seeded_history import record_earlier_send
from console.events import ReportedEvent
from console.models import ProviderEvent, utcnow
from console.store.provider_events import record_events
from console.web.extensions import db


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


def _sent_with_an_event(app, add_intent, number: int) -> int:
    """An intent sent once (attempt row `number` of the database), with a delivery; the event."""
    intent_id = add_intent("pending", to=f"p{number}@example.com")
    sent_at = utcnow() - dt.timedelta(minutes=3)
    with app.app_context():
        record_earlier_send(
            db.session, intent_id, provider_message_id=f"p-{number}", sent_at=sent_at
        )
        event = ReportedEvent(
            source="webhook", source_event_id=f"e{number}", event_type="delivered",
            recipient=f"p{number}@example.com", provider_message_id=f"p-{number}", payload={},
        )  # fmt: skip
        record_events(db.session, [event])
        db.session.commit()
        return db.session.scalar(
            select(ProviderEvent.id).where(ProviderEvent.intent_id == intent_id)
        )


def test_an_event_page_names_the_attempt_by_its_number_for_its_intent(
    app, console_client, add_intent
):
    for number in (1, 2):
        _sent_with_an_event(app, add_intent, number)
    event_id = _sent_with_an_event(app, add_intent, 3)
    with app.app_context():
        assert db.session.scalar(select(ProviderEvent.attempt_id).where(
            ProviderEvent.id == event_id)) == 3  # fmt: skip
    page = console_client("viewer").get(f"/events/{event_id}").text
    said = text_of(re.search(r'<dl class="facts" id="event-effect">.*?</dl>', page, re.S).group(0))
    assert "attempt 1 of 1" in said, said


def test_the_events_and_suppressions_lists_say_how_long_ago(app, console_client, add_intent):
    event_id = _sent_with_an_event(app, add_intent, 1)
    client = console_client("operator")
    post(client, "/suppressions", address="gone@example.com", reason="asked")
    events = client.get("/events").text
    row = re.search(
        rf'<tr>\s*<td class="token"><a href="/events/{event_id}">.*?</tr>', events, re.S
    )
    assert re.search(r"\d+ s ago|now", text_of(row.group(0))), row.group(0)
    suppressions = client.get("/suppressions").text
    row = re.search(r"<tr>\s*<td class=\"address\">.*?gone@.*?</tr>", suppressions, re.S)
    assert re.search(r"\d+ s ago|now", text_of(row.group(0))), row.group(0)
