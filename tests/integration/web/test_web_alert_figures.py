"""The dashboard's alert lines say the figures as they are now, not as they were when the
alert fired, in minutes and hours rather than second counts."""

from __future__ import annotations

import datetime as dt
import html
import re

from console.models import utcnow
from console.state_tables import AlertState
from console.web.extensions import db


def banner_of(page: str) -> str:
    start = page.index('<div class="alerts"')
    block = page[start : page.index('<div class="tiles">')]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", block)))


def fire(app, condition: str, summary: str, **details) -> None:
    with app.app_context():
        db.session.add(
            AlertState(
                condition=condition,
                active=True,
                summary=summary,
                fired_at=utcnow() - dt.timedelta(hours=1),
                details=details,
            )
        )
        db.session.commit()


def test_a_rate_alert_shows_the_rate_the_table_shows(app, console_client, add_intent):
    now = utcnow()
    for number in range(55):
        complained = {"complained_at": now - dt.timedelta(minutes=5)} if number == 0 else {}
        add_intent("submitted", submitted_at=now - dt.timedelta(hours=1), **complained)
    fire(
        app, "sender_rate:complaint:24h", "complaint rate over the 24h window is 1/16 (limit 0.3 %)"
    )
    banner = banner_of(console_client("viewer").get("/").text)
    assert "1/16" not in banner
    assert "Complaint rate, last 24 h: 1.82 % (1 of 55), limit 0.3 %" in banner


def test_a_rate_back_under_the_limit_says_so(app, console_client, add_intent):
    now = utcnow()
    for _ in range(3):
        add_intent("submitted", submitted_at=now - dt.timedelta(hours=1))
    fire(app, "sender_rate:bounce:24h", "bounce rate over the 24h window is 1/2 (limit 2 %)")
    banner = banner_of(console_client("viewer").get("/").text)
    assert "Permanent bounce rate, last 24 h: 0.00 % (0 of 3)" in banner
    assert "back under the limit" in banner


def test_a_pending_age_alert_shows_the_age_now(app, console_client, add_intent):
    add_intent("pending", created_at=utcnow() - dt.timedelta(hours=2, minutes=5))
    fire(app, "pending_age:login-code", "oldest pending login-code mail is 900 s old (target 60 s)",
         template="login-code", lane="critical")  # fmt: skip
    banner = banner_of(console_client("viewer").get("/").text)
    assert "The oldest pending login-code mail is 2 h 5 min old (target" in banner
    assert "900 s" not in banner


def test_other_alerts_read_in_minutes_and_hours(app, console_client):
    fire(
        app,
        "inbound_mail_at_events_endpoint",
        "inbound mail is arriving at the events endpoint (3 in the last 3600 s): give it a topic",
    )
    fire(app, "provider_auth", "the provider refused our credentials (535) 2 time(s): check it")
    banner = banner_of(console_client("viewer").get("/").text)
    assert "(3 in the last 1 h)" in banner and "3600 s" not in banner
    assert "refused our credentials (535) 2 times" in banner
    assert not re.search(r"\d{4}-\d{2}-\d{2}T", banner)
    assert re.search(r"\(since \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\)", banner)
