"""The next step in a real browser: the row's last outcome, the page's attempt budget, and
what a requeue of a capped intent gives."""

from __future__ import annotations

import datetime as dt

import pytest
from playwright.sync_api import expect

from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.web.extensions import db
from tests.support.browser_console import add_intent, log_in, open_search

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
    open_search(page)
    page.fill("#q", "order-9301")
    row = page.locator(f"#intent-{intent_id}")
    expect(row).to_contain_text("transient 451 4.3.0")
    expect(row).to_contain_text("try again later")

    row.locator("a").first.click()
    expect(page.locator("#next-step")).to_contain_text("8 of 8 used")
    expect(page.locator("#requeue-budget")).to_contain_text("used all 8 attempts")
    expect(page.locator("#more-attempts")).to_contain_text("Give it more attempts (1 to 8)")
    expect(page.locator("#requeue-form input[name=more_attempts]")).to_have_value("3")
    page.fill("#requeue-form textarea[name=reason]", "relay fixed")
    page.click("#requeue-form button")
    expect(page.locator("#intent-status")).to_have_text("pending")
    expect(page.locator("body")).to_contain_text("pending, with 3 more attempts")
    expect(page.locator("#next-attempt")).to_contain_text(
        "attempt 9 of 11: 3 attempts remain, given by a requeue"
    )
    assert page.url.endswith(f"/intents/{intent_id}"), "post/redirect/get"


def test_operator_gives_a_capped_intent_n_more_attempts(live_console, console_page):
    page = console_page
    intent_id = make_capped(live_console, "order-9302:confirmation")
    log_in(page, live_console, "olga")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    page.fill("#requeue-form input[name=more_attempts]", "1")
    page.fill("#requeue-form textarea[name=reason]", "one last try")
    page.click("#requeue-form button")
    expect(page.locator("#intent-status")).to_have_text("pending")
    expect(page.locator("#next-attempt")).to_contain_text(
        "attempt 9 of 9: 1 attempt remains, given by a requeue — the last one"
    )
    with live_console.app.app_context():
        granted = db.session.get(Intent, intent_id).attempts_granted
    assert granted == 9


def test_a_requeue_refuses_more_attempts_than_the_cap(live_console, console_page):
    page = console_page
    intent_id = make_capped(live_console, "order-9303:confirmation")
    log_in(page, live_console, "olga")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    field = page.locator("#requeue-form input[name=more_attempts]")
    field.evaluate("input => input.removeAttribute('max')")  # what a hand-made request could send
    field.fill("9")
    page.fill("#requeue-form textarea[name=reason]", "many more")
    page.click("#requeue-form button")
    expect(page.locator("body")).to_contain_text("from 1 to 8")
    expect(page.locator("#intent-status")).to_have_text("dead")
    assert page.url.endswith(f"/intents/{intent_id}")


def test_a_held_intent_says_it_waits_for_the_release(live_console, console_page):
    page = console_page
    intent_id = add_intent(live_console, "order-9304:confirmation", "pending", "order-9304")
    log_in(page, live_console, "olga")
    page.goto(live_console.url("/holds?kind=template&value=order-confirmation"))
    page.fill("#place-hold input[name=reason]", "wrong prices")
    page.click("#place-hold button")
    expect(page.locator("#nav-holds")).to_contain_text("1")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    expect(page.locator("#intent-held")).to_contain_text("no end: until released")
    expect(page.locator("#next-due")).not_to_contain_text("waiting for a worker")
    expect(page.locator("#next-waits")).to_contain_text(
        "the release of template order-confirmation"
    )
    page.goto(live_console.url("/holds"))
    page.fill("#hold-table input[name=reason]", "prices fixed")
    page.click("#hold-table button")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    expect(page.locator("#next-due")).to_contain_text("waiting for a worker")


def test_an_expired_reset_is_not_offered_a_requeue(live_console, console_page):
    page = console_page
    with live_console.app.app_context():
        params = {"name": "Ada", "reset_url": "https://shop.example.com/r"}
        intent = enqueue(db.session, key="reset:9305", event="reset:9305", to="ada@example.com",
                         template="password-reset", params=params)  # fmt: skip
        db.session.flush()
        db.session.query(Intent).filter_by(id=intent.id).update(
            {"status": "expired", "created_at": utcnow() - dt.timedelta(hours=1)}
        )
        db.session.commit()
        intent_id = intent.id
    log_in(page, live_console, "olga")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    expect(page.locator("#requeue-form")).to_have_count(0)
    expect(page.locator("#requeue-too-late")).to_contain_text(
        "password-reset max age 30 min), so the worker would expire it again at once"
    )
