"""Dashboard figures, search with keyset pagination, and the intent timeline."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import select

from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.state_tables import AlertState, WorkerHeartbeat
from console.web import dashboard_figures as figures
from console.web.dashboard import chart_shapes, dashboard_alerts, format_age
from console.web.extensions import db


def add_rows(app, *rows) -> None:
    with app.app_context():
        db.session.add_all(rows)
        db.session.commit()


def heartbeat(last_tick_at: dt.datetime) -> WorkerHeartbeat:
    return WorkerHeartbeat(
        worker_id="w1", host="h", pid=1, started_at=last_tick_at, last_tick_at=last_tick_at
    )


def attempt(intent_id: int, started_at: dt.datetime, outcome: str, number: int = 1) -> Attempt:
    return Attempt(
        intent_id=intent_id,
        attempt_number=number,
        lease_token=f"t{number}",
        worker_id="worker-a",
        stage="reply_read",
        started_at=started_at,
        finished_at=started_at + dt.timedelta(milliseconds=120),
        outcome=outcome,
        duration_ms=120,
    )


def test_dashboard_counts_by_status_and_lane(app, console_client, add_intent):
    for status, lane, count in [
        ("pending", "critical", 2),
        ("pending", "bulk", 3),
        ("submitted", "bulk", 4),
        ("ambiguous", "critical", 1),
        ("dead", "bulk", 2),
    ]:
        for _ in range(count):
            add_intent(status, lane=lane)
    with app.app_context():
        snapshot = figures.dashboard(db.session)
    assert snapshot.counts == {
        ("pending", "critical"): 2,
        ("pending", "bulk"): 3,
        ("submitted", "bulk"): 4,
        ("ambiguous", "critical"): 1,
        ("dead", "bulk"): 2,
    }
    assert (snapshot.ambiguous, snapshot.dead, snapshot.lane_total("bulk")) == (1, 2, 9)

    page = console_client("viewer").get("/").text
    assert re.search(r'id="tile-ambiguous"[^>]*>\s*<span class="num">1</span>', page)
    assert re.search(r'id="tile-dead"[^>]*>\s*<span class="num">2</span>', page)
    assert 'href="/intents?status=ambiguous"' in page
    assert '<td data-status-total="pending">5</td>' in page
    assert 'href="/intents?status=pending&amp;lane=critical">2</a>' in page


def test_submitted_intents_are_counted_over_the_last_day(app, console_client, add_intent):
    now = utcnow()
    add_intent("submitted", lane="bulk", created_at=now - dt.timedelta(hours=2))
    add_intent("submitted", lane="bulk", created_at=now - dt.timedelta(hours=30))
    with app.app_context():
        assert figures.dashboard(db.session, now=now).counts == {("submitted", "bulk"): 1}
    client = console_client("viewer")
    page = client.get("/").text
    link = 'href="/intents?status=submitted&amp;lane=bulk&amp;age=lt1d">1</a>'
    assert link in page and "(last 24 h)" in page
    listed = client.get("/intents?status=submitted&lane=bulk&age=lt1d").text
    assert listed.count('<td data-label="#"><a href="/intents/') == 1


def test_oldest_pending_age_and_age_buckets_per_lane(app, add_intent):
    now = utcnow()
    for seconds in (30, 90, 120, 600, 7200):
        add_intent("pending", lane="critical", created_at=now - dt.timedelta(seconds=seconds))
    add_intent("pending", lane="bulk", created_at=now - dt.timedelta(seconds=10))
    add_intent("submitted", lane="bulk", created_at=now - dt.timedelta(hours=5))
    with app.app_context():
        snapshot = figures.dashboard(db.session, now=now)
    assert snapshot.age_buckets == {
        "critical": {"lt1m": 1, "1to5m": 2, "5to60m": 1, "gt1h": 1},
        "bulk": {"lt1m": 1, "1to5m": 0, "5to60m": 0, "gt1h": 0},
    }
    assert snapshot.oldest_pending_seconds("critical") == pytest.approx(7200, abs=1)
    assert snapshot.oldest_pending_seconds("bulk") == pytest.approx(10, abs=1)


def test_age_bucket_links_find_the_same_intents(app, console_client, add_intent):
    now = utcnow()
    old = add_intent("pending", lane="critical", created_at=now - dt.timedelta(seconds=200))
    add_intent("pending", lane="critical", created_at=now - dt.timedelta(seconds=5))
    client = console_client("viewer")
    page = client.get("/").text
    link = re.search(r'href="(/intents\?status=pending&amp;lane=critical&amp;age=1to5m)"', page)
    listed = client.get(link.group(1).replace("&amp;", "&")).text
    assert re.findall(r'href="/intents/(\d+)"', listed) == [str(old), str(old)]


def test_chart_counts_attempts_per_minute_over_the_last_hour(app, add_intent):
    now = utcnow().replace(second=30, microsecond=0)
    intent_id = add_intent("submitted")
    add_rows(
        app,
        attempt(intent_id, now - dt.timedelta(minutes=2, seconds=10), "accepted", 1),
        attempt(intent_id, now - dt.timedelta(minutes=2, seconds=5), "accepted", 2),
        attempt(intent_id, now - dt.timedelta(minutes=2, seconds=20), "transient", 3),
        attempt(intent_id, now - dt.timedelta(minutes=30), "ambiguous", 4),
        attempt(intent_id, now - dt.timedelta(minutes=90), "accepted", 5),
        attempt(intent_id, now, "accepted", 6),
    )
    with app.app_context():
        chart = figures.dashboard(db.session, now=now).chart
    assert len(chart) == 60
    busy = {bar.minute: (bar.accepted, bar.failed) for bar in chart if bar.accepted or bar.failed}
    assert busy == {57: (2, 1), 29: (0, 1), 59: (1, 0)}
    shapes, peak = chart_shapes(chart)
    assert peak == 3
    tallest = shapes[57]
    assert tallest.accepted_height + tallest.failed_height == pytest.approx(116, abs=0.2)
    assert tallest.label == "2 min ago: 2 accepted, 1 failed"


def test_alerts_for_dead_letters_ambiguity_and_a_silent_worker(app, console_client, add_intent):
    client = console_client("viewer")
    page = client.get("/").text
    assert "No worker has ticked yet" in page
    add_rows(app, heartbeat(utcnow()))
    page = client.get("/").text
    assert 'role="alert"' not in page
    add_intent("dead")
    add_intent("ambiguous")
    with app.app_context():
        db.session.query(WorkerHeartbeat).update(
            {"last_tick_at": utcnow() - dt.timedelta(minutes=10)}
        )
        db.session.commit()
    page = client.get("/").text
    assert '<a href="/intents?status=dead">1 dead letter to decide on</a>' in page
    assert "1 ambiguous send waiting for reconciliation" in page
    assert "The worker has not ticked for 10 min" in page


def test_other_firing_alert_conditions_join_the_banner(app, console_client, add_intent):
    fired_at = utcnow() - dt.timedelta(minutes=3)
    add_rows(
        app,
        heartbeat(utcnow()),
        AlertState(condition="breaker_open:bulk", active=True, summary="bulk lane paused",
                   fired_at=fired_at),
        AlertState(condition="dead_letter", active=True, summary="1 dead letter",
                   fired_at=fired_at),
        AlertState(condition="provider_auth", active=False, summary="provider refused",
                   fired_at=fired_at),
    )  # fmt: skip
    page = console_client("viewer").get("/").text
    banner = page.split('class="alerts"')[1].split("</div>")[0]
    assert f"Bulk lane paused (since {fired_at:%Y-%m-%d %H:%M} UTC)" in banner
    assert "1 dead letter" not in banner, "dead letters show with their count instead"
    assert "provider refused" not in banner, "cleared conditions are not shown"


def test_dashboard_alerts_threshold():
    now = utcnow()
    snapshot = figures.Dashboard(now, {}, {}, {}, [], now - dt.timedelta(seconds=59), {})
    assert dashboard_alerts(snapshot, stale_after_seconds=60) == []
    assert format_age(59) == "59 s" and format_age(3720) == "1 h 2 min"
    assert format_age(90000) == "1 d 1 h" and format_age(None) == "–"


def test_htmx_poll_gets_only_the_panel(app, console_client):
    client = console_client("viewer")
    full = client.get("/").text
    assert 'hx-trigger="every 5s"' in full and 'id="live-toggle"' in full
    fragment = client.get("/", headers={"HX-Request": "true"}).text
    assert "<html" not in fragment and 'id="tile-dead"' in fragment


def test_search_finds_by_event_key_recipient_message_id_provider_id_and_number(
    app, console_client, add_intent
):
    client = console_client("viewer")
    target = add_intent(
        "submitted",
        event="order-1234",
        key="order-1234:confirmation",
        to="Grace.Hopper@Example.com",
        provider_message_id="ses-0102abc",
    )
    add_intent("pending", event="order-999", key="order-999:confirmation")
    add_intent("pending", event="case:47", key="case:47:assigned", to="other@example.com")
    with app.app_context():
        message_id = db.session.get(Intent, target).message_id

    def found(q: str) -> list[int]:
        page = client.get("/intents", query_string={"q": q}).text
        return sorted({int(i) for i in re.findall(r'href="/intents/(\d+)"', page)})

    assert found("order-1234") == [target]
    assert found("order-1234:conf") == [target]
    assert found("order-") == [1, 2]
    assert found("Grace.Hopper@example.com") == [target]
    assert found(message_id) == [target]
    assert found(message_id.strip("<>")) == [target]
    assert found("ses-0102abc") == [target]
    assert found(f"#{target}") == [target]
    assert found("order_") == [], "a LIKE wildcard in the box is taken literally"
    assert found("nothing-like-it") == []


def test_search_filters_by_status_lane_template_and_age(app, console_client, add_intent):
    client = console_client("viewer")
    now = utcnow()
    old_failed = add_intent("failed", lane="bulk", created_at=now - dt.timedelta(hours=2))
    new_failed = add_intent("failed", lane="critical")
    add_intent("pending", lane="bulk")

    def found(**args) -> list[int]:
        page = client.get("/intents", query_string=args).text
        return sorted({int(i) for i in re.findall(r'href="/intents/(\d+)"', page)})

    assert found(status="failed") == [old_failed, new_failed]
    assert found(status="failed", lane="critical") == [new_failed]
    assert found(status="failed", age="gt1h") == [old_failed]
    assert found(template="login-code", age="lt1m") == [new_failed, new_failed + 1]
    assert found(template="welcome") == []
    response = client.get("/intents?status=lost")
    assert response.status_code == 400 and "unknown status" in response.text


def test_search_pages_by_keyset_without_gaps_or_repeats(app, console_client, add_intent):
    client = console_client("viewer")
    created = [add_intent("pending", event=f"batch:{n:03d}") for n in range(120)]
    seen: list[int] = []
    url = "/intents?q=batch:"
    pages = 0
    while url:
        page = client.get(url.replace("&amp;", "&")).text
        rows = re.findall(r'<td data-label="#"><a href="/intents/(\d+)">', page)
        seen += [int(row) for row in rows]
        pages += 1
        next_link = re.search(r'id="next-page" href="([^"]+)"', page)
        url = next_link.group(1) if next_link else None
    assert pages == 3
    assert seen == created, "prefix matches come in key order: batch:000, batch:001, ..."
    assert client.get("/intents?after=not-a-position").status_code == 400
    fragment = client.get("/intents?q=batch:", headers={"HX-Request": "true"}).text
    assert "<html" not in fragment and fragment.count('<td data-label="#"><a href="/intents/') == 50


def test_detail_is_one_timeline_in_time_order(app, console_client, add_intent):
    now = utcnow()
    intent_id = add_intent(
        "submitted",
        event="order-77",
        created_at=now - dt.timedelta(minutes=10),
        provider_message_id="relay-42",
    )
    add_rows(
        app,
        attempt(intent_id, now - dt.timedelta(minutes=9), "transient", 1),
        attempt(intent_id, now - dt.timedelta(minutes=5), "accepted", 2),
        ProviderEvent(
            source="ses",
            source_event_id="e1",
            event_type="delivered",
            intent_id=intent_id,
            provider_message_id="relay-42",
            recipient="ada@example.com",
            occurred_at=now - dt.timedelta(minutes=4),
            received_at=now - dt.timedelta(minutes=3),
        ),
        AuditEntry(
            actor="olga",
            action="requeue",
            intent_id=intent_id,
            reason="relay fixed",
            before_status="failed",
            after_status="pending",
            created_at=now - dt.timedelta(minutes=7),
        ),
        Suppression(
            recipient="ada@example.com",
            reason="complaint",
            created_at=now - dt.timedelta(minutes=1),
        ),
    )
    with app.app_context():
        db.session.execute(
            select(Attempt).where(Attempt.attempt_number == 1)
        ).scalar_one().reply_code = 451
        db.session.commit()
    page = console_client("viewer").get(f"/intents/{intent_id}").text
    titles = [
        re.sub(r"<[^>]+>", "", title)
        for title in re.findall(r'<div class="title">(.*?)</div>', page)
    ]
    assert titles == [
        "Business event order-77",
        "Attempt 1: transient",
        "Operator: requeue",
        "Attempt 2: accepted",
        "Provider: delivered",
        "Recipient ada@example.com suppressed",
    ]
    assert "<dd>451</dd>" in page and "relay fixed" in page and "failed → pending" in page
    assert "worker-a" in page and "120 ms" in page


def test_unknown_intent_is_404(app, console_client):
    assert console_client("viewer").get("/intents/424242").status_code == 404
