"""Two tabs of one operator: what a stale tab does after the worker retried the intent.

Tab 1 requeues a failed intent, a real worker retries it and it fails again
(status back to ``failed``); tab 2, opened before all that, still shows
``failed`` and its Requeue button: pressing it answers 409, says what changed
and requeues nothing. A confirmed bulk preview reached again with Back cannot
be confirmed a second time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect
from sqlalchemy import func, select

from console.core.send_result import SendResult
from console.models import AuditEntry, Intent
from console.outbox import enqueue
from console.store.database import make_session_factory
from console.transports.memory import MemoryTransport
from console.vocabulary import REPLY_READ
from console.web.extensions import db
from tests.support.browser_console import PASSWORDS, screenshot
from tests.support.workers import build_worker

pytestmark = pytest.mark.browser

RECIPIENT = "grace@example.com"
REJECTED = SendResult(REPLY_READ, code=554, reply_text="5.7.1 rejected by policy")


def add_failed_intent(live_console, number: int, attempts: int) -> int:
    with live_console.app.app_context():
        intent = enqueue(
            db.session,
            key=f"order-{number}:confirmation",
            event=f"order-{number}",
            to=RECIPIENT,
            template="order-confirmation",
            params={
                "customer_name": "Grace",
                "order_number": f"order-{number}",
                "items": [{"quantity": 1, "name": "Lamp", "price": "30.00"}],
                "total": "30.00",
            },
        )
        db.session.flush()
        db.session.query(Intent).filter_by(id=intent.id).update(
            {"status": "failed", "attempt_count": attempts}
        )
        db.session.commit()
        return intent.id


def state_of(live_console, intent_id: int) -> tuple[str, int]:
    with live_console.app.app_context():
        row = db.session.execute(
            select(Intent.status, Intent.attempt_count).where(Intent.id == intent_id)
        ).one()
        return row.status, row.attempt_count


def requeues_of(live_console, *intent_ids: int) -> int:
    with live_console.app.app_context():
        query = select(func.count()).where(
            AuditEntry.action == "requeue", AuditEntry.intent_id.in_(intent_ids)
        )
        return db.session.execute(query).scalar_one()


def retry_and_fail(live_console) -> None:
    """One tick of a real worker whose relay rejects every message for good.

    It runs in a thread of its own: Playwright's event loop holds this one.
    """
    with live_console.app.app_context():
        factory = make_session_factory(db.engine)

    def tick() -> None:
        worker = build_worker(factory, MemoryTransport({RECIPIENT: [REJECTED]}))
        try:
            worker.run_once()
        finally:
            worker.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(tick).result(timeout=30)


def two_tabs(live_console, console_page):
    """Log in once; return two pages of the same browser context (one session)."""
    tab_1 = console_page
    tab_1.goto(live_console.url("/login"))
    tab_1.fill("input[name=username]", "olga")
    tab_1.fill("input[name=password]", PASSWORDS["olga"])
    tab_1.click("button:has-text('Log in')")
    tab_1.wait_for_url(live_console.url("/"))
    tab_2 = tab_1.context.new_page()
    tab_2.set_default_timeout(10_000)
    return tab_1, tab_2


def test_a_tab_opened_before_a_retry_cannot_requeue_again(live_console, console_page):
    intent_id = add_failed_intent(live_console, 9101, attempts=2)
    tab_1, tab_2 = two_tabs(live_console, console_page)
    detail = live_console.url(f"/intents/{intent_id}")
    tab_2.goto(detail)
    tab_1.goto(detail)
    expect(tab_2.locator("#intent-status")).to_have_text("failed")

    tab_1.fill("#requeue-form textarea[name=reason]", "relay fixed")
    tab_1.click("#requeue-form button")
    expect(tab_1.locator(".flash-success")).to_contain_text("Requeued")
    expect(tab_1.locator("#intent-status")).to_have_text("pending")
    retry_and_fail(live_console)
    assert state_of(live_console, intent_id) == ("failed", 3)

    tab_2.fill("#requeue-form textarea[name=reason]", "relay fixed")
    with tab_2.expect_response(lambda response: response.request.method == "POST") as answer:
        tab_2.click("#requeue-form button")
    assert answer.value.status == 409
    expect(tab_2.locator(".flash-error")).to_contain_text(
        "retried since you opened this page: now failed after attempt 3"
    )
    expect(tab_2.locator("#intent-status")).to_have_text("failed")
    expect(tab_2.locator("#timeline")).to_contain_text("554")
    screenshot(tab_2, "stale-tab-409")
    assert state_of(live_console, intent_id) == ("failed", 3)
    assert requeues_of(live_console, intent_id) == 1

    tab_2.fill("#requeue-form textarea[name=reason]", "seen the new failure")
    tab_2.click("#requeue-form button")  # the page it answered with is current: it acts
    expect(tab_2.locator("#intent-status")).to_have_text("pending")
    assert requeues_of(live_console, intent_id) == 2


def test_a_confirmed_bulk_preview_reached_again_with_back_acts_no_more(live_console, console_page):
    ids = [add_failed_intent(live_console, 9200 + n, attempts=1) for n in range(3)]
    tab_1, tab_2 = two_tabs(live_console, console_page)
    tab_1.goto(live_console.url("/intents?q=order-920"))
    tab_1.click("text=requeue…")
    expect(tab_1.locator("#bulk-summary")).to_contain_text("requeues 3")
    tab_2.goto(tab_1.url)  # the same preview, opened in a second tab
    expect(tab_2.locator("#bulk-summary")).to_contain_text("requeues 3")

    tab_1.fill("#bulk-confirm-form textarea[name=reason]", "relay was down")
    tab_1.click("#bulk-confirm-form button")
    expect(tab_1.locator(".flash-success")).to_contain_text("Requeued 3 intents.")
    retry_and_fail(live_console)
    assert [state_of(live_console, i)[0] for i in ids] == ["failed"] * 3

    tab_1.go_back()
    expect(tab_1.locator("#bulk-confirmed")).to_contain_text("already confirmed by olga")
    expect(tab_1.locator("#bulk-confirm-form")).to_have_count(0)
    screenshot(tab_1, "bulk-back-after-confirm")

    tab_2.fill("#bulk-confirm-form textarea[name=reason]", "relay was down")
    with tab_2.expect_response(lambda response: response.request.method == "POST") as answer:
        tab_2.click("#bulk-confirm-form button")
    assert answer.value.status == 409
    expect(tab_2.locator("#bulk-confirmed")).to_contain_text("requeued 3 intents")
    assert [state_of(live_console, i)[0] for i in ids] == ["failed"] * 3
    assert requeues_of(live_console, *ids) == 3
