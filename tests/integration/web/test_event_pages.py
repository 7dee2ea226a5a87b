"""Provider events in the console: unmatched list, event page, links to them elsewhere."""

from __future__ import annotations

import os
import shutil
import threading

import pytest
from sqlalchemy import select

from console.events import ReportedEvent
from console.models import ProviderEvent
from console.store.provider_events import record_events
from console.web.extensions import db

BROWSER = shutil.which("chromium")
REQUIRE_BROWSER = os.environ.get("CONSOLE_TEST_REQUIRE_BROWSER") == "1"
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def bounce(event_id: str, provider_id: str, recipient="ada@example.com") -> ReportedEvent:
    return ReportedEvent(
        source="ses",
        source_event_id=event_id,
        event_type="bounced",
        recipient=recipient,
        bounce_type="permanent",
        diagnostic="5.1.1 smtp; 550 5.1.1 user unknown",
        provider_message_id=provider_id,
        payload={"eventType": "Bounce", "secret-looking": "x-payload-marker"},
    )


@pytest.fixture
def recorded(app, add_intent):
    """One intent with a matched permanent bounce, and one event still unmatched."""
    intent_id = add_intent("submitted", provider_message_id="ses-known")
    with app.app_context():
        record_events(db.session, [bounce("sns-1", "ses-known")])
        record_events(db.session, [bounce("sns-2", "ses-unknown", "bob@example.com")])
        db.session.commit()
        query = select(ProviderEvent.source_event_id, ProviderEvent.id)
        ids = {source_id: row_id for source_id, row_id in db.session.execute(query)}
    return {"intent": intent_id, "matched": ids["sns-1"], "unmatched": ids["sns-2"]}


def test_unmatched_list_shows_only_waiting_events(console_client, recorded):
    page = console_client("viewer").get("/events/unmatched")
    assert page.status_code == 200
    assert f'href="/events/{recorded["unmatched"]}"' in page.text
    assert f'href="/events/{recorded["matched"]}"' not in page.text
    assert "ses-unknown" in page.text and "(1)" in page.text


def test_event_page_links_intent_and_suppression(console_client, recorded):
    page = console_client("viewer").get(f"/events/{recorded['matched']}")
    assert page.status_code == 200
    assert f'href="/intents/{recorded["intent"]}"' in page.text
    assert "ada@example.com</a> (bounce)" in page.text
    assert "x-payload-marker" not in page.text, "viewers do not see the raw payload"
    as_operator = console_client("operator").get(f"/events/{recorded['matched']}")
    assert "x-payload-marker" in as_operator.text


def test_timeline_and_suppression_list_link_to_the_event(console_client, recorded):
    client = console_client("viewer")
    timeline = client.get(f"/intents/{recorded['intent']}").text
    assert f'href="/events/{recorded["matched"]}"' in timeline
    suppressions = client.get("/suppressions").text
    assert f'href="/events/{recorded["matched"]}">event {recorded["matched"]}</a>' in suppressions
    assert f'href="/events/{recorded["unmatched"]}">event {recorded["unmatched"]}</a>' in (
        suppressions
    )


def test_event_pages_need_a_login_and_an_existing_event(app, console_client, recorded):
    anonymous = app.test_client().get("/events/unmatched")
    assert anonymous.status_code in (302, 401)
    assert console_client("viewer").get("/events/999999").status_code == 404


@pytest.fixture
def live_console(sqlite_url, request):
    """The console served by a real WSGI server on 127.0.0.1, on a fresh SQLite database."""
    if BROWSER is None:
        if REQUIRE_BROWSER:
            pytest.fail("Chromium is not installed and CONSOLE_TEST_REQUIRE_BROWSER=1")
        pytest.skip("Chromium is not installed")
    import waitress

    from console.app import create_app
    from tests.conftest import TEST_SECRET_KEY

    app = create_app({"CONSOLE_DATABASE_URL": sqlite_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY})
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield app, f"http://127.0.0.1:{server.effective_port}"
    server.close()
    thread.join(5)
    with app.app_context():
        db.engine.dispose()


@pytest.mark.browser
def test_operator_follows_a_bounce_from_suppression_to_intent(live_console):
    from playwright.sync_api import sync_playwright
    from werkzeug.security import generate_password_hash

    from console.models import OperatorUser, utcnow
    from console.outbox import enqueue

    app, base_url = live_console
    with app.app_context():
        db.session.add(
            OperatorUser(
                username="olga",
                password_hash=generate_password_hash("pw-olga-1", method="pbkdf2:sha256:1000"),
                role="operator",
                created_at=utcnow(),
            )
        )
        intent = enqueue(
            db.session, key="k1", to="ada@example.com", template="login-code", params={"code": "1"}
        )
        intent.provider_message_id = "ses-known"
        db.session.flush()
        record_events(db.session, [bounce("sns-1", "ses-known")])
        db.session.commit()
        intent_id = intent.id

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=BROWSER, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{base_url}/login")
            page.fill("input[name=username]", "olga")
            page.fill("input[name=password]", "pw-olga-1")
            page.click("button[type=submit]")
            page.click("nav >> text=Suppressions")
            page.click("#suppression-table >> text=/event \\d+/")
            assert "Provider event" in page.inner_text("h1")
            assert "bounced (permanent)" in page.inner_text("h1")
            page.click(f"#event-effect >> text=Intent {intent_id}")
            assert page.url.endswith(f"/intents/{intent_id}")
            assert "Provider: bounced (permanent)" in page.inner_text("#timeline")
            page.click("nav >> text=Events")
            assert "bounced (permanent)" in page.inner_text("#event-table")
            page.click("#event-filters a:has-text('Unmatched only')")
            page.wait_for_url(f"{base_url}/events?match=unmatched")
            assert "No event is waiting" in page.inner_text("main")
        finally:
            browser.close()
