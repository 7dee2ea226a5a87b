"""Post/redirect/get in a real browser: after a refused form, a reload sends nothing again."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.models import Intent
from console.web.extensions import db
from tests.support.browser_console import add_intent, log_in

pytestmark = pytest.mark.browser


def reload_sends_no_form(page) -> None:
    """Reload the page and check the browser asked for it with GET, resending no form."""
    page.wait_for_load_state("load")  # console.js has run
    methods: list[str] = []
    page.on("request", lambda request: methods.append(request.method))
    url = page.url
    page.reload()
    page.wait_for_load_state("load")
    assert page.url == url
    assert "POST" not in methods, methods


def test_a_refused_suppression_lands_on_a_get_page_and_reloads_without_resending(
    live_console, console_page
):
    page = console_page
    log_in(page, live_console, "olga")
    page.goto(live_console.url("/suppressions"))
    page.fill("#add-suppression input[name=address]", "prg@example.com")
    page.fill("#add-suppression input[name=reason]", "   ")  # passes `required`, not the server
    page.click("#add-suppression button")
    expect(page).to_have_url(re.compile(r"/suppressions\?address=prg(%40|@)example\.com$"))
    expect(page.locator(".flash-error")).to_contain_text("Not suppressed: a reason is required.")
    expect(page.locator("#add-suppression input[name=address]")).to_have_value("prg@example.com")
    reload_sends_no_form(page)
    expect(page.locator(".flash-error")).to_have_count(0)


def test_a_stale_action_answers_409_but_reloads_its_get_page(live_console, console_page):
    page = console_page
    intent_id = add_intent(live_console, "order-prg-1:confirmation", "failed", "order-prg-1")
    log_in(page, live_console, "olga")
    page.goto(live_console.url(f"/intents/{intent_id}"))
    with live_console.app.app_context():  # the worker moves it on while the page is open
        db.session.query(Intent).filter_by(id=intent_id).update({"status": "dead"})
        db.session.commit()
    page.fill("#requeue-form textarea[name=reason]", "relay fixed")
    with page.expect_response(lambda response: response.request.method == "POST") as answer:
        page.click("#requeue-form button[type=submit]")
    assert answer.value.status == 409
    expect(page).to_have_url(live_console.url(f"/intents/{intent_id}"))
    reload_sends_no_form(page)


def test_a_refused_login_reloads_the_login_page_without_resending_the_password(
    live_console, console_page
):
    page = console_page
    page.goto(live_console.url("/login"))
    page.fill("input[name=username]", "olga")
    page.fill("input[name=password]", "wrong password")
    page.click("button:has-text('Log in')")
    expect(page.locator(".flash-error")).to_contain_text("Wrong username or password.")
    expect(page).to_have_url(re.compile(r"/login$"))
    reload_sends_no_form(page)
