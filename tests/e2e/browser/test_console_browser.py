"""The console in a real browser: log in, search, trace, reconcile, roles, CSRF, live refresh."""

from __future__ import annotations

import json
import re
import time

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from console.models import Intent
from console.web.extensions import db
from tests.support.browser_console import add_intent, log_in, open_search, screenshot

pytestmark = pytest.mark.browser


def status_of(live_console, intent_id: int) -> str:
    with live_console.app.app_context():
        return db.session.execute(select(Intent.status).where(Intent.id == intent_id)).scalar()


def csrf_token_of(page) -> str:
    return json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]


def test_operator_finds_traces_and_reconciles_an_ambiguous_send(live_console, console_page):
    page = console_page
    intent_id = add_intent(live_console, "order-5001:confirmation", "ambiguous", "order-5001")
    add_intent(live_console, "order-5002:confirmation", "submitted", "order-5002")

    page.goto(live_console.url("/login"))
    screenshot(page, "login")
    log_in(page, live_console, "olga")
    screenshot(page, "dashboard")

    open_search(page)
    page.fill("#q", "order-5001")  # live search: htmx swaps the rows in, no submit
    result = page.locator("#result-table a", has_text="order-5001")
    expect(result).to_be_visible()
    expect(page.locator("#result-table a", has_text="order-5002")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/intents\?q=order-5001"))
    screenshot(page, "search")

    result.click()
    page.wait_for_url(live_console.url(f"/intents/{intent_id}"))
    expect(page.locator("#timeline")).to_contain_text("Business event order-5001")
    page.click("#preview-form button")
    expect(page.locator("#preview")).to_contain_text("Your order order-5001:confirmation")
    html_part = page.frame_locator("#preview iframe").locator("body")
    expect(html_part).to_contain_text("Thank you for your order order-5001:confirmation")
    screenshot(page, "detail-ambiguous")

    page.fill("#reconcile-form input[name=provider_message_id]", "relay-queue-77")
    page.fill("#reconcile-form textarea[name=reason]", "found in the relay log")
    page.click("#reconcile-form button:has-text('Mark accepted')")
    expect(page.locator(".flash-success")).to_contain_text("Marked accepted")
    expect(page.locator("#intent-status")).to_have_text("submitted")
    expect(page.locator("#timeline")).to_contain_text("Operator: reconcile accepted")
    expect(page.locator("#timeline")).to_contain_text("found in the relay log")
    assert status_of(live_console, intent_id) == "submitted"
    screenshot(page, "detail-reconciled")

    page.click("nav >> text=Audit")
    row = page.locator("#audit-table tr", has_text="reconcile accepted")
    expect(row).to_contain_text("olga")
    expect(row).to_contain_text("ambiguous → submitted")
    expect(row).to_contain_text("found in the relay log")
    screenshot(page, "audit")


def test_viewer_sees_no_action_buttons_and_is_refused_when_posting(live_console, console_page):
    page = console_page
    intent_id = add_intent(live_console, "order-6001:confirmation", "ambiguous", "order-6001")
    log_in(page, live_console, "vic")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    expect(page.locator("#timeline")).to_contain_text("Business event order-6001")
    expect(page.locator("#actions")).to_have_count(0)
    expect(page.locator("main button")).to_have_count(0)
    expect(page.locator("nav >> text=Audit")).to_have_count(0)
    screenshot(page, "detail-viewer")

    response = page.request.post(
        live_console.url(f"/intents/{intent_id}/reconcile"),
        form={"resolution": "accepted", "reason": "sneaky", "csrf_token": csrf_token_of(page)},
        max_redirects=0,
    )
    assert response.status == 403
    assert status_of(live_console, intent_id) == "ambiguous"
    page.goto(live_console.url("/users"))
    expect(page.locator("h1")).to_contain_text("403")
    screenshot(page, "forbidden")


def test_post_without_csrf_token_is_refused_and_changes_nothing(live_console, console_page):
    page = console_page
    intent_id = add_intent(live_console, "order-7001:confirmation", "failed", "order-7001")
    log_in(page, live_console, "olga")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    url = live_console.url(f"/intents/{intent_id}/requeue")
    form = {"reason": "forged", "expected_status": "failed"}
    refused = page.request.post(url, form=form, max_redirects=0)
    assert refused.status == 400
    assert status_of(live_console, intent_id) == "failed"
    accepted = page.request.post(
        url, form={**form, "csrf_token": csrf_token_of(page)}, max_redirects=0
    )
    assert accepted.status == 303
    assert status_of(live_console, intent_id) == "pending"


def test_dashboard_refreshes_itself_and_can_be_paused(live_console, console_page):
    page = console_page
    log_in(page, live_console, "olga")
    dead = page.locator("#tile-dead .num")
    before = int(dead.inner_text())
    page.evaluate("document.body.dataset.loadedOnce = 'yes'")

    add_intent(live_console, "order-8001:confirmation", "dead", "order-8001")
    expect(dead).to_have_text(str(before + 1))
    assert page.evaluate("document.body.dataset.loadedOnce") == "yes", "no page reload"
    expect(page.locator(".alerts")).to_contain_text("dead letter")
    screenshot(page, "dashboard-refreshed")

    page.click("#live-toggle")
    expect(page.locator("#live-toggle")).to_have_text("Resume live refresh")
    add_intent(live_console, "order-8002:confirmation", "dead", "order-8002")
    time.sleep(2.5)  # more than two refresh intervals while paused
    expect(dead).to_have_text(str(before + 1))
    page.click("#live-toggle")
    expect(dead).to_have_text(str(before + 2))


def test_admin_pages_suppressions_and_users(live_console, console_page):
    page = console_page
    log_in(page, live_console, "ada")
    page.click("nav >> text=Suppressions")
    page.fill("#add-suppression input[name=address]", "Stop.Mail@Example.com")
    page.fill("#add-suppression input[name=reason]", "asked by phone")
    page.click("#add-suppression button")
    expect(page.locator("#suppression-table")).to_contain_text("stop.mail@example.com")
    screenshot(page, "suppressions")

    page.click("nav >> text=Users")
    page.fill("#create-user input[name=username]", "sam")
    page.fill("#create-user input[name=password]", "long enough")
    page.select_option("#create-user select[name=role]", "viewer")
    page.click("#create-user button")
    expect(page.locator("#user-table tr", has_text="sam")).to_contain_text("viewer")
    screenshot(page, "users")
