"""The last recorded drill on the dashboard, and its report, in a real browser (viewer role)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import pytest
from playwright.sync_api import expect
from sqlalchemy import update

from console.state_tables import DrillRun
from console.web.extensions import db
from tests.support.browser_console import log_in
from tests.support.commands import CONSOLE_BIN

pytestmark = pytest.mark.browser


def record_a_drill(live_console, tmp_path, *only: str, **environ: str):
    """``console drill --record --only rollback`` with the live console's database configured."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    url = live_console.app.config["SQLALCHEMY_DATABASE_URI"]
    names = [argument for name in ("rollback", *only) for argument in ("--only", name)]
    return subprocess.run(
        [CONSOLE_BIN, "drill", "--record", *names],
        env={**base, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "drill" * 8, **environ},
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_dashboard_links_the_last_drill_to_its_report(live_console, console_page, tmp_path):
    page = console_page
    log_in(page, live_console, "vic")
    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator("#last-drill")).to_have_count(0)  # no record, no line

    run = record_a_drill(live_console, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "recorded as drill run" in run.stdout
    with live_console.app.app_context():
        three_days_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=3, minutes=1)
        db.session.execute(update(DrillRun).values(ran_at=three_days_ago))
        db.session.commit()

    page.reload()
    line = page.locator("#last-drill")
    expect(line).to_have_text("Last drill: 3 days ago — 1 of 1 held")
    line.locator("a").click()
    expect(page.locator("h1")).to_contain_text("Drill of")
    expect(page.locator("#drill-facts")).to_contain_text("1 of 1")
    row = page.locator("#drill-results tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("rollback")
    expect(row).to_contain_text("no intent after the rollback")
    expect(row).to_contain_text("pass")


def test_a_drill_not_applicable_to_the_transport_is_shown_as_such(
    live_console, console_page, tmp_path
):
    run = record_a_drill(
        live_console, tmp_path, "421-domain", CONSOLE_TRANSPORT="http",
        CONSOLE_PROVIDER="postmark", CONSOLE_HTTP_PROVIDER_KEY="never-used",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    page = console_page
    log_in(page, live_console, "vic")
    line = page.locator("#last-drill")
    expect(line).to_have_text("Last drill: just now — 1 of 1 held")
    line.locator("a").click()
    expect(page.locator("#drill-results tbody tr")).to_have_count(2)
    skipped = page.locator("#drill-results tbody tr.drill-na")
    expect(skipped).to_contain_text("421-domain")
    expect(skipped).to_contain_text("not applicable to this transport")
    expect(skipped.locator("td").nth(3)).to_have_text("n/a")
