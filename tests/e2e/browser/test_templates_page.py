"""The templates page in a real browser: the list for everyone, the preview for operators."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser_console import log_in

pytestmark = pytest.mark.browser


def test_operator_opens_a_template_and_sees_its_preview(live_console, console_page):
    page = console_page
    log_in(page, live_console, "olga")
    page.click("nav >> text=Templates")
    row = page.locator("#template-password-reset")
    expect(row).to_contain_text("critical")
    expect(row).to_contain_text("30 min")
    page.click("#template-table >> text=order-confirmation")
    expect(page.locator("h1")).to_have_text("Template order-confirmation")
    expect(page.locator("#preview-subject")).not_to_be_empty()
    html_part = page.frame_locator("#template-preview iframe").locator("body")
    expect(html_part).not_to_be_empty()


def test_viewer_sees_the_list_only(live_console, console_page):
    page = console_page
    log_in(page, live_console, "vic")
    page.click("nav >> text=Templates")
    expect(page.locator("#template-welcome")).to_contain_text("bulk")
    expect(page.locator("#template-table a")).to_have_count(0)
