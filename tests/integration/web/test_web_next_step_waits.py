"""The next step of an intent that cannot go now says what it waits for: a hold, a deferred
domain, a paused lane; an intent past its template's max age is not offered a requeue that
would only expire it again, and the server refuses one."""

from __future__ import annotations

import datetime as dt
import html
import re

from sqlalchemy import select

from console.models import AuditEntry, Intent, utcnow
from console.state_tables import DomainDeferral, LaneBreaker
from console.web.extensions import db


def text_of(page: str) -> str:
    page = re.sub(r"<wbr>", "", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def next_step_of(client, intent_id: int) -> str:
    page = client.get(f"/intents/{intent_id}").text
    [section] = re.findall(r'<section class="card" id="next-step">(.*?)</section>', page, re.S)
    return text_of(section)


def post(client, path: str, **form):
    return client.post(path, data={"csrf_token": client.csrf_token, **form})


def test_a_held_intent_waits_for_the_release_not_for_a_worker(app, console_client, add_intent):
    operator = console_client("operator", "olga")
    intent_id = add_intent("pending", lane="bulk", next_attempt_at=utcnow())
    assert (
        post(operator, "/holds", kind="lane", value="bulk", reason="maintenance").status_code == 303
    )
    step = next_step_of(operator, intent_id)
    assert "waiting for a worker" not in step
    assert "not sent while it waits" in step
    assert "waits for the release of lane bulk" in step
    assert "by olga, no end: until released" in step


def test_an_intent_to_a_deferred_domain_waits_for_the_deferral(app, console_client, add_intent):
    intent_id = add_intent("pending", to="ada@slow.example.net", next_attempt_at=utcnow())
    until = utcnow() + dt.timedelta(minutes=11)
    with app.app_context():
        db.session.add(DomainDeferral(domain="slow.example.net", deferred_until=until,
                                      reply_code=421, updated_at=utcnow()))  # fmt: skip
        db.session.commit()
    step = next_step_of(console_client("viewer"), intent_id)
    assert "waiting for a worker" not in step
    assert f"the end of slow.example.net's deferral at {until:%Y-%m-%d %H:%M} UTC" in step
    assert "in 10 min" in step or "in 11 min" in step


def test_an_intent_in_a_paused_lane_waits_for_the_breaker(app, console_client, add_intent):
    intent_id = add_intent("pending", next_attempt_at=utcnow())  # login-code: critical
    with app.app_context():
        db.session.add(LaneBreaker(lane="critical", state="open", trips=1,
                                   resume_at=utcnow() + dt.timedelta(minutes=2)))  # fmt: skip
        db.session.commit()
    step = next_step_of(console_client("viewer"), intent_id)
    assert "the critical lane's circuit breaker to close; a probe may go at" in step


def test_a_free_intent_still_waits_for_a_worker(app, console_client, add_intent):
    intent_id = add_intent("pending", next_attempt_at=utcnow())
    step = next_step_of(console_client("viewer"), intent_id)
    assert "due now, waiting for a worker" in step and "waits for" not in step


def test_an_intent_past_its_max_age_is_not_offered_a_requeue(app, console_client, add_intent):
    # login-code mail is useful for 10 min after it is enqueued
    intent_id = add_intent("expired", created_at=utcnow() - dt.timedelta(hours=1))
    operator = console_client("operator")
    page = operator.get(f"/intents/{intent_id}").text
    assert 'id="requeue-form"' not in page
    [said] = re.findall(r'<p class="warning" id="requeue-too-late">(.*?)</p>', page, re.S)
    assert "A requeue cannot send it" in said and "login-code max age 10 min" in said
    assert "the worker would expire it again at once" in said
    assert "a requeue would expire at once" in next_step_of(operator, intent_id)


def test_the_server_refuses_a_requeue_past_the_max_age(app, console_client, add_intent):
    intent_id = add_intent("expired", created_at=utcnow() - dt.timedelta(hours=1))
    operator = console_client("operator")
    response = post(
        operator, f"/intents/{intent_id}/requeue", reason="try", expected_status="expired"
    )
    assert response.status_code == 303
    shown = text_of(operator.get(response.location).text)
    assert "Nothing was done: a requeue cannot send it" in shown
    with app.app_context():
        assert db.session.get(Intent, intent_id).status == "expired"
        assert db.session.scalars(select(AuditEntry)).all() == []


def test_a_young_expired_intent_can_still_be_requeued(app, console_client, add_intent):
    intent_id = add_intent("expired", created_at=utcnow() - dt.timedelta(minutes=2))
    page = console_client("operator").get(f"/intents/{intent_id}").text
    assert 'id="requeue-form"' in page and 'id="requeue-too-late"' not in page


def test_the_timeline_ends_with_the_status_the_intent_has_now(app, console_client, add_intent):
    intent_id = add_intent("expired", status_reason="not sent: no longer useful after "
                           "2026-12-01T19:13:10.534014+00:00")  # fmt: skip
    with app.app_context():
        db.session.add(AuditEntry(actor="olga", action="requeue", intent_id=intent_id,
                                  reason="again", before_status="expired",
                                  after_status="pending", created_at=utcnow()))  # fmt: skip
        db.session.commit()
    page = console_client("viewer").get(f"/intents/{intent_id}").text
    titles = [
        text_of(title).strip() for title in re.findall(r'<div class="title">(.*?)</div>', page)
    ]
    assert titles[-2:] == ["Operator: requeue", "Now expired"]
    assert "no longer useful after 2026-12-01 19:13 UTC" in text_of(page)


def test_the_bulk_preview_says_what_capped_intents_get(app, console_client, add_intent):
    add_intent("dead", attempt_count=8, event="wave:1", key="wave:1")
    page = (
        console_client("operator")
        .get("/intents/bulk?action=requeue&q=wave:&preview=abcdefgh12345678")
        .text
    )
    [said] = re.findall(r'<p class="muted" id="bulk-capped">(.*?)</p>', page, re.S)
    said = text_of(said)
    assert "already used its 8 attempts, or is older than the 1 d the worker retries for" in said
    assert "gets one more attempt: if that fails for now, it is dead again" in said
