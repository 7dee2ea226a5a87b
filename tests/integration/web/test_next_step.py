"""The next step, said plainly: last outcome and next attempt in the results; the attempt
budget, next try, expiry and what a requeue gives on the intent page."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from console.models import Attempt, utcnow
from console.web.extensions import db


def add_attempt(app, intent_id: int, number: int, **columns) -> None:
    with app.app_context():
        started = utcnow() - dt.timedelta(minutes=10 - number)
        db.session.add(
            Attempt(
                intent_id=intent_id,
                attempt_number=number,
                lease_token=f"token-{intent_id}-{number}",
                stage=columns.pop("stage", "reply_read"),
                started_at=started,
                finished_at=started + dt.timedelta(seconds=1),
                **columns,
            )
        )
        db.session.commit()


def text_of(page: str) -> str:
    """The page's words without markup, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def result_row(page: str, intent_id: int) -> str:
    [row] = re.findall(rf'<tr id="intent-{intent_id}">(.*?)</tr>', page, re.DOTALL)
    return text_of(row)


@pytest.fixture
def retrying(app, add_intent):
    """A pending intent after two transient failures, next try in about 4 minutes."""
    next_try = utcnow() + dt.timedelta(minutes=4, seconds=30)
    intent_id = add_intent("pending", attempt_count=2, next_attempt_at=next_try,
                           event="order:77", key="order:77:confirmation")  # fmt: skip
    add_attempt(app, intent_id, 1, outcome="transient", reply_code=421, reply_text="too busy")
    reply = "Temporary local problem, please try again later " + "x" * 200
    add_attempt(app, intent_id, 2, outcome="transient", reply_code=451, enhanced_status="4.3.0",
                reply_text=reply)  # fmt: skip
    return intent_id, next_try


def test_result_rows_show_the_last_outcome_and_the_next_attempt(console_client, retrying):
    intent_id, next_try = retrying
    page = console_client("viewer").get("/intents?q=order:77").text
    row = result_row(page, intent_id)
    assert "transient 451 4.3.0" in row
    assert "Temporary local problem" in row
    assert "x" * 100 not in row, "the reply is shortened in the list"
    assert next_try.strftime("%H:%M UTC") in row
    assert "in 4 min" in row


def test_result_rows_say_why_without_attempts(console_client, add_intent):
    intent_id = add_intent("cancelled", status_reason="not eligible: already verified",
                           event="verify:1", key="verify:1")  # fmt: skip
    row = result_row(console_client("viewer").get("/intents?q=verify:1").text, intent_id)
    assert "not eligible: already verified" in row


def test_intent_page_shows_the_attempt_budget_and_next_try(console_client, retrying):
    intent_id, next_try = retrying
    page = text_of(console_client("viewer").get(f"/intents/{intent_id}").text)
    assert "attempt 3 of 8" in page
    assert f"{next_try:%Y-%m-%d %H:%M} UTC" in page
    assert "in 4 min" in page


def test_intent_page_shows_the_expiry_and_the_template_max_age(console_client, add_intent):
    expires = utcnow() + dt.timedelta(hours=2)
    with_expiry = add_intent("pending", expires_at=expires)
    page = text_of(console_client("viewer").get(f"/intents/{with_expiry}").text)
    # login-code mail is useless after 10 min: that comes before the application's expiry
    assert "useful until" in page
    assert "login-code max age 10 min" in page
    assert "expires (set by the application)" in page
    assert f"{expires:%Y-%m-%d %H:%M} UTC" in page


def test_requeue_of_a_capped_intent_offers_more_attempts_and_without_them_gives_one(
    app, console_client, add_intent
):
    dead = add_intent("dead", attempt_count=8, status_reason="gave up after 8 attempts")
    client = console_client("operator")
    page = text_of(client.get(f"/intents/{dead}").text)
    assert "used all 8 attempts" in page
    assert "Give it more attempts (1 to 8)" in page
    form = {"reason": "relay fixed", "expected_status": "dead", "csrf_token": client.csrf_token}
    response = client.post(f"/intents/{dead}/requeue", data=form)
    assert response.status_code == 303
    after = text_of(client.get(f"/intents/{dead}").text)
    assert "attempt 9 of 8" in after
    assert "the last one" in after


def test_requeue_of_a_failed_intent_says_how_many_attempts_remain(console_client, add_intent):
    failed = add_intent("failed", attempt_count=3)
    page = text_of(console_client("operator").get(f"/intents/{failed}").text)
    assert "used 3 of 8 attempts" in page
    assert "a requeue gives it 5 more attempts" in page
