"""Export from the search page in a real browser: the button downloads the search as CSV."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_console import add_intent, log_in, open_search

pytestmark = pytest.mark.browser


def test_export_buttons_download_the_search_shown(live_console, console_page):
    page = console_page
    wanted = add_intent(live_console, "order-9101:confirmation", "failed", "order-9101")
    add_intent(live_console, "order-9102:confirmation", "submitted", "order-9102")
    log_in(page, live_console, "olga")
    open_search(page)
    page.fill("#q", "order-9101")
    expect(page).to_have_url(re.compile(r"q=order-9101"))
    expect(page.locator("#result-table")).not_to_contain_text("order-9102")

    with page.expect_download() as download_info:
        page.click("#export-links >> text=CSV")
    download = download_info.value
    assert download.suggested_filename.endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(open(download.path(), encoding="utf-8").read())))
    assert [int(row["id"]) for row in rows] == [wanted]
    assert json.loads(rows[0]["params"])["order_number"] == "order-9101:confirmation"

    with page.expect_download() as download_info:
        page.click("#export-links >> text=JSON Lines")
    lines = open(download_info.value.path(), encoding="utf-8").read().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [wanted]
