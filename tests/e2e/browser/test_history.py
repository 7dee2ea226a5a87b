"""Back and Forward in a real browser: every page with live search comes back whole."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.store.suppressions import add_suppression
from console.web.extensions import db
from tests.support.browser_console import add_intent, log_in, open_from_nav, open_search

pytestmark = pytest.mark.browser


def suppress(live_console, address: str) -> None:
    with live_console.app.app_context():
        add_suppression(db.session, address, actor="olga", reason="history test")
        db.session.commit()


def expect_whole_page(page, search_box: str, value: str) -> None:
    """The navigation, the search form with `value`, and the results are all there."""
    expect(page.locator("nav[aria-label=Main]")).to_be_visible()
    expect(page.locator(search_box)).to_be_visible()
    expect(page.locator(search_box)).to_have_value(value)
    expect(page.locator("main h1")).to_have_count(1)


def test_back_and_forward_on_the_search_page_restore_the_whole_page(live_console, console_page):
    page = console_page
    first = add_intent(live_console, "order:1004:confirmation", "submitted", "order:1004")
    second = add_intent(live_console, "order:1005:confirmation", "pending", "order:1005")
    log_in(page, live_console, "olga")
    open_search(page)
    page.fill("#q", "order:1005")
    expect(page).to_have_url(re.compile(r"/intents\?q=order%3A1005"))
    expect(page.locator("#result-table")).to_contain_text("order:1005")
    page.fill("#q", "order:1004")
    expect(page).to_have_url(re.compile(r"/intents\?q=order%3A1004"))
    expect(page.locator("#result-table")).to_contain_text("order:1004")

    page.go_back()
    expect(page).to_have_url(re.compile(r"/intents\?q=order%3A1005"))
    expect_whole_page(page, "#q", "order:1005")
    expect(page.locator(f"#result-table a[href='/intents/{second}']").first).to_be_visible()

    page.go_forward()
    expect(page).to_have_url(re.compile(r"/intents\?q=order%3A1004"))
    expect_whole_page(page, "#q", "order:1004")
    expect(page.locator(f"#result-table a[href='/intents/{first}']").first).to_be_visible()

    # out to an intent and Back again: still the whole search page
    page.locator(f"#result-table a[href='/intents/{first}']").first.click()
    page.wait_for_url(live_console.url(f"/intents/{first}"))
    page.go_back()
    expect_whole_page(page, "#q", "order:1004")


def test_back_on_the_suppression_list_restores_the_whole_page(live_console, console_page):
    page = console_page
    suppress(live_console, "history.one@example.com")
    suppress(live_console, "history.two@example.com")
    log_in(page, live_console, "olga")
    open_from_nav(page, "Suppressions", "/suppressions")
    page.fill("#suppression-q", "history.one")
    expect(page).to_have_url(re.compile(r"q=history.one"))
    page.fill("#suppression-q", "history.two")
    expect(page).to_have_url(re.compile(r"q=history.two"))
    expect(page.locator("#suppression-table")).to_contain_text("history.two@example.com")

    page.go_back()
    expect(page).to_have_url(re.compile(r"q=history.one"))
    expect_whole_page(page, "#suppression-q", "history.one")
    expect(page.locator("#suppression-table")).to_contain_text("history.one@example.com")
    expect(page.locator("#add-suppression")).to_be_visible()
    page.go_forward()
    expect_whole_page(page, "#suppression-q", "history.two")


def test_event_feed_filters_live_and_back_restores_the_whole_page(live_console, console_page):
    from console.events import ReportedEvent
    from console.store.provider_events import record_events

    with live_console.app.app_context():
        for number, kind in enumerate(("delivered", "bounced", "complained")):
            event = ReportedEvent(
                source="webhook",
                source_event_id=f"history-{number}",
                event_type=kind,
                recipient=f"{kind}@example.com",
                provider_message_id=f"history-{number}",
                bounce_type="permanent" if kind == "bounced" else None,
            )
            record_events(db.session, [event])
        db.session.commit()
    page = console_page
    log_in(page, live_console, "vic")
    open_from_nav(page, "Events", "/events")
    expect(page.locator("#event-table")).to_contain_text("complained@example.com")
    page.select_option("#event-filters select[name=type]", "bounced")
    expect(page).to_have_url(re.compile(r"/events\?type=bounced"))
    expect(page.locator("#event-table")).not_to_contain_text("complained@example.com")
    page.fill("#event-recipient", "bounced@example.com")
    expect(page).to_have_url(re.compile(r"recipient=bounced%40example.com"))
    expect(page.locator("#event-table")).to_contain_text("bounced@example.com")

    page.go_back()
    expect(page).to_have_url(re.compile(r"/events\?type=bounced&source=&recipient=&match=$"))
    expect(page.locator("nav[aria-label=Main]")).to_be_visible()
    expect(page.locator("#event-filters select[name=type]")).to_have_value("bounced")
    expect(page.locator("#event-recipient")).to_have_value("")
    expect(page.locator("#event-table")).to_contain_text("bounced@example.com")
