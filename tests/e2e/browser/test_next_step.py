"""The next step in a real browser: the row's last outcome, the page's attempt budget, and
what a requeue of a capped intent gives."""

from __future__ import annotations

import datetime as dt

import pytest
from playwright.sync_api import expect

from console.models import Attempt, Intent, utcnow
from console.web.extensions import db
from tests.e2e.browser.test_console_browser import add_intent, log_in

pytestmark = pytest.mark.browser


def make_capped(live_console, key: str) -> int:
    """A dead intent that used all 8 attempts, the last refused with 451 4.3.0."""
    intent_id = add_intent(live_console, key, "dead", key.split(":")[0])
    with live_console.app.app_context():
        db.session.query(Intent).filter_by(id=intent_id).update(
            {"attempt_count": 8, "status_reason": "gave up after 8 attempts"}
        )
        started = utcnow() - dt.timedelta(minutes=1)
        db.session.add(
            Attempt(
                intent_id=intent_id,
                attempt_number=8,
                lease_token=f"t-{intent_id}",
                stage="reply_read",
                started_at=started,
                outcome="transient",
                reply_code=451,
                enhanced_status="4.3.0",
                reply_text="try again later",
            )
        )
        db.session.commit()
    return intent_id


def test_operator_sees_the_outcome_and_what_a_requeue_gives(live_console, console_page):
    page = console_page
    intent_id = make_capped(live_console, "order-9301:confirmation")
    log_in(page, live_console, "olga")
    page.click("nav >> text=Intents")
    page.fill("#q", "order-9301")
    row = page.locator(f"#intent-{intent_id}")
    expect(row).to_contain_text("transient 451 4.3.0")
    expect(row).to_contain_text("try again later")

    row.locator("a").first.click()
    expect(page.locator("#next-step")).to_contain_text("8 of 8 used")
    expect(page.locator("#requeue-budget")).to_contain_text("a requeue gives it 1 more attempt")
    page.fill("#requeue-form textarea[name=reason]", "relay fixed")
    page.click("#requeue-form button")
    expect(page.locator("#intent-status")).to_have_text("pending")
    expect(page.locator("#next-attempt")).to_contain_text("attempt 9 of 8 — the last one")
