"""No page is wider than a 1280 px window, whatever the length of what it shows; no page
logs an error in the browser (a missing favicon was the last one)."""

from __future__ import annotations

import datetime as dt

import pytest

from console.events import ReportedEvent
from console.models import Intent, utcnow
from console.outbox import enqueue
from console.state_tables import WorkerHeartbeat
from console.store.accounts import create_user
from console.store.provider_events import record_events
from console.web.extensions import db
from tests.support.browser_console import log_in

pytestmark = pytest.mark.browser

LONG_LOCAL = "a" * 60 + "." + "b" * 60
LONG_ADDRESS = f"{LONG_LOCAL}@{'c' * 60}.example.com"
LONG_KEY = "order:" + "9" * 240
LONG_USERNAME = "u" * 64  # the longest a username may be


@pytest.fixture
def long_values(live_console):
    with live_console.app.app_context():
        intent = enqueue(
            db.session, key=LONG_KEY, event=LONG_KEY[:255], to=LONG_ADDRESS,
            template="login-code", params={"code": "123456"},
        )  # fmt: skip
        db.session.flush()
        db.session.query(Intent).filter_by(id=intent.id).update(
            {"status": "failed", "status_reason": "5.1.1 " + "no such user " * 40}
        )
        record_events(db.session, [ReportedEvent(
            source="webhook", source_event_id="layout-" + "e" * 200, event_type="bounced",
            recipient=LONG_ADDRESS, bounce_type="permanent", provider_message_id="p" * 250,
        )])  # fmt: skip
        db.session.add(WorkerHeartbeat(worker_id="w" * 100, host="h" * 200, pid=1,
                                       started_at=utcnow() - dt.timedelta(hours=1),
                                       last_tick_at=utcnow()))  # fmt: skip
        create_user(db.session, LONG_USERNAME, "long enough password", "viewer")
        db.session.commit()
        return intent.id


def test_no_page_is_wider_than_the_window(live_console, chromium, long_values):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on(
        "console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None
    )
    try:
        log_in(page, live_console, "ada")
        paths = [
            "/",
            "/intents?q=" + "x" * 5000,
            f"/intents?q={LONG_KEY[:60]}",
            f"/intents/{long_values}",
            "/events",
            f"/events?recipient={LONG_ADDRESS}",
            "/templates",
            "/templates/order-confirmation",
            "/suppressions",
            "/intents/bulk?action=requeue&q=order:&preview=abcdefgh12345678",
            "/users",
            "/audit",
            "/holds",
            "/account",
            "/erasure",
            f"/suppressions/removed?recipient={LONG_ADDRESS}",
            f"/suppressions?address={LONG_ADDRESS}",
        ]
        too_wide = {}
        for path in paths:
            page.goto(live_console.url(path))
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 1280:
                too_wide[path[:80]] = width
        assert too_wide == {}
        assert errors == []
    finally:
        context.close()
