"""/events: every provider event newest first, with filters and keyset pages; viewers included."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from console.events import ReportedEvent
from console.models import ProviderEvent
from console.store.event_feed import events_page
from console.store.provider_events import record_events
from console.web.event_filters import EventFilters, InvalidEventFilter
from console.web.extensions import db


def reported(source_event_id: str, event_type: str, recipient: str, provider_id: str, **more):
    return ReportedEvent(
        source=more.pop("source", "webhook"),
        source_event_id=source_event_id,
        event_type=event_type,
        recipient=recipient,
        provider_message_id=provider_id,
        payload={"marker": f"payload-of-{source_event_id}"},
        **more,
    )


@pytest.fixture
def feed(app, add_intent):
    """Two intents with events of several kinds and sources, and two events left unmatched."""
    ada = add_intent("submitted", to="ada@example.com", provider_message_id="p-ada")
    bob = add_intent("submitted", to="bob@example.com", provider_message_id="p-bob")
    events = [
        reported("e1", "delivered", "ada@example.com", "p-ada"),
        reported("e2", "delivered", "bob@example.com", "p-bob", source="ses"),
        reported("e3", "bounced", "Bob@Example.com", "p-bob", bounce_type="permanent"),
        reported("e4", "complained", "carol@example.com", "p-nobody"),
        reported("e5", "delivered", "ADA@example.com", "p-unknown", source="ses"),
    ]
    with app.app_context():
        for event in events:
            record_events(db.session, [event])
        db.session.commit()
        rows = db.session.execute(select(ProviderEvent.source_event_id, ProviderEvent.id))
        ids = {source_id: row_id for source_id, row_id in rows}
    return {"ada": ada, "bob": bob, **ids}


def listed(app, **args) -> list[int]:
    with app.app_context():
        page = events_page(db.session, EventFilters.from_args(args))
        return [row.id for row in page.rows]


def test_every_event_newest_first(app, feed):
    assert listed(app) == [feed[f"e{n}"] for n in (5, 4, 3, 2, 1)]


def test_filters_by_type_source_and_match(app, feed):
    assert listed(app, type="delivered") == [feed["e5"], feed["e2"], feed["e1"]]
    assert listed(app, source="ses") == [feed["e5"], feed["e2"]]
    assert listed(app, match="unmatched") == [feed["e5"], feed["e4"]]
    assert listed(app, match="matched") == [feed["e3"], feed["e2"], feed["e1"]]
    assert listed(app, type="delivered", source="ses", match="unmatched") == [feed["e5"]]


def test_recipient_filter_finds_matched_and_unmatched_events_without_case(app, feed):
    assert listed(app, recipient="ada@example.com") == [feed["e5"], feed["e1"]]
    assert listed(app, recipient="bob@EXAMPLE.com") == [feed["e3"], feed["e2"]]
    assert listed(app, recipient="carol@example.com", type="complained") == [feed["e4"]]
    assert listed(app, recipient="nobody@example.com") == []


def test_keyset_pages_walk_every_event_once(app, feed):
    seen, before = [], None
    with app.app_context():
        while True:
            page = events_page(db.session, EventFilters(), before=before, limit=2)
            assert len(page.rows) <= 2
            seen += [row.id for row in page.rows]
            if page.next_before is None:
                break
            before = page.next_before
    assert seen == [feed[f"e{n}"] for n in (5, 4, 3, 2, 1)]


def test_unknown_filter_values_are_refused():
    with pytest.raises(InvalidEventFilter):
        EventFilters.from_args({"match": "sometimes"})
    with pytest.raises(InvalidEventFilter):
        EventFilters.from_args({"type": "x" * 31})


def test_viewer_sees_the_feed_without_payloads(console_client, feed):
    page = console_client("viewer").get("/events")
    assert page.status_code == 200
    for name in ("e1", "e2", "e3", "e4", "e5"):
        assert f'href="/events/{feed[name]}"' in page.text
    assert "payload-of-" not in page.text
    assert f'href="/intents/{feed["ada"]}"' in page.text
    assert 'href="/events?match=unmatched"' in page.text or "match=unmatched" in page.text


def test_feed_page_filters_and_pages_by_query_string(console_client, feed):
    client = console_client("operator")
    page = client.get("/events?type=bounced&recipient=bob@example.com")
    assert f'href="/events/{feed["e3"]}"' in page.text
    assert f'href="/events/{feed["e2"]}"' not in page.text
    fragment = client.get("/events?match=unmatched", headers={"HX-Request": "true"})
    assert "<nav" not in fragment.text
    assert f'href="/events/{feed["e4"]}"' in fragment.text
    assert f'href="/events/{feed["e1"]}"' not in fragment.text
    refused = client.get("/events?match=sometimes")
    assert refused.status_code == 400 and "<nav" in refused.text


def test_the_nav_links_to_the_feed_and_unmatched_stays_a_filter(console_client, feed):
    client = console_client("viewer")
    dashboard = client.get("/").text
    assert 'href="/events"' in dashboard
    unmatched = client.get("/events/unmatched")
    assert unmatched.status_code == 200
    assert f'href="/events/{feed["e4"]}"' in unmatched.text
    assert f'href="/events/{feed["e1"]}"' not in unmatched.text


def test_older_events_link_keeps_the_filters(console_client, app, feed):
    client = console_client("viewer")
    with app.app_context():
        for number in range(60):
            record_events(db.session, [reported(f"bulk{number}", "delivered", "z@x.com", "p")])
        db.session.commit()
    page = client.get("/events?type=delivered")
    [older] = re.findall(r'id="older-events" href="([^"]+)"', page.text)
    assert "type=delivered" in older and "before=" in older
    second = client.get(html.unescape(older))
    assert second.status_code == 200 and f'href="/events/{feed["e1"]}"' in second.text
