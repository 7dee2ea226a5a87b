"""Enqueue → acceptance latency and possible duplicates: /metrics, the dashboard and the alert.

Intents are aged by SQL (created_at and submitted_at set), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math

import pytest
from sqlalchemy import update

from console.config import load_settings
from console.models import Intent, ProviderEvent, utcnow
from console.ops.metrics import delivery_figures
from console.ops.metrics.delivery_figures import DeliveryCollector, latency_conditions
from console.outbox import enqueue
from console.store.latency import Percentiles, lane_percentiles, over_target_by_minute
from console.vocabulary import BULK, CRITICAL, SUBMITTED
from tests.conftest import TEST_SECRET_KEY

_numbers = itertools.count(1)
NOW = utcnow().replace(second=30, microsecond=0)


def accepted(session, *, lane: str, latency: float, at: dt.datetime, template="login-code") -> int:
    """Store an intent of `lane` accepted at `at`, `latency` seconds after its enqueue."""
    number = next(_numbers)
    intent = enqueue(session, key=f"k:{number}", to=f"p{number}@example.com", template=template,
                     params={"code": "1", "name": "Ada", "login_url": "https://x.example"},
                     lane=lane)  # fmt: skip
    session.flush()
    session.execute(
        update(Intent)
        .where(Intent.id == intent.id)
        .values(status=SUBMITTED, submitted_at=at, created_at=at - dt.timedelta(seconds=latency))
    )
    return intent.id


@pytest.fixture
def settings(tmp_path):
    variables = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": TEST_SECRET_KEY}
    return load_settings({}, instance_path=tmp_path, overrides=variables)


def test_percentiles_of_the_last_hour_per_lane(session_factory):
    with session_factory() as session:
        for seconds in range(1, 101):
            accepted(session, lane=CRITICAL, latency=seconds, at=NOW - dt.timedelta(minutes=5))
        accepted(session, lane=CRITICAL, latency=9999, at=NOW - dt.timedelta(hours=2))
        session.commit()
        figures = lane_percentiles(session, NOW - dt.timedelta(hours=1), NOW)
    critical = figures[CRITICAL]
    assert critical.count == 100
    assert critical.p50_seconds == pytest.approx(50, abs=0.01)
    assert critical.p99_seconds == pytest.approx(99, abs=0.01)
    assert figures[BULK] == Percentiles(0, None, None)


def test_metrics_count_what_was_accepted_and_duplicated_since_the_process_started(
    session_factory,
):
    clock_now = [NOW]
    collector = DeliveryCollector(session_factory, clock=lambda: clock_now[0],
                                  template_names=lambda: ["login-code"])  # fmt: skip
    with session_factory() as session:
        accepted(session, lane=CRITICAL, latency=3, at=NOW - dt.timedelta(seconds=10))  # before
        first = accepted(session, lane=CRITICAL, latency=3, at=NOW + dt.timedelta(seconds=5))
        accepted(session, lane=BULK, latency=400, at=NOW + dt.timedelta(seconds=6),
                 template="welcome")  # fmt: skip
        for number in (1, 2):
            session.add(ProviderEvent(source="ses", source_event_id=f"d{number}",
                                      event_type="delivered", intent_id=first,
                                      received_at=NOW + dt.timedelta(seconds=number)))  # fmt: skip
        session.commit()

    clock_now[0] = NOW + dt.timedelta(seconds=20)  # still settling: nothing counted yet
    assert sample(collector, "console_enqueue_to_accepted_seconds_count") == {}
    clock_now[0] = NOW + dt.timedelta(seconds=60)
    counts = sample(collector, "console_enqueue_to_accepted_seconds_count")
    assert counts == {(("lane", "critical"), ("template", "login-code")): 1.0,
                      (("lane", "bulk"), ("template", "other")): 1.0}  # fmt: skip
    buckets = sample(collector, "console_enqueue_to_accepted_seconds_bucket")
    assert buckets[(("lane", "bulk"), ("le", "300.0"), ("template", "other"))] == 0
    assert buckets[(("lane", "bulk"), ("le", "600.0"), ("template", "other"))] == 1
    duplicates = sample(collector, "console_possible_duplicate_sends_total")
    assert duplicates == {
        (("cause", "automatic_resend"),): 0,
        (("cause", "operator_resend"),): 0,
        (("cause", "second_delivery"),): 1,
    }
    clock_now[0] = NOW + dt.timedelta(seconds=120)  # counted once, not at every scrape
    assert (
        sample(collector, "console_possible_duplicate_sends_total")[(("cause", "second_delivery"),)]
        == 1
    )
    assert sum(sample(collector, "console_enqueue_to_accepted_seconds_count").values()) == 2


def sample(collector, name: str) -> dict:
    found = {}
    for family in collector.collect():
        for s in family.samples:
            if s.name == name:
                found[tuple(sorted(s.labels.items()))] = s.value
    return found


def test_the_alert_fires_when_the_hours_p99_stayed_over_the_target_for_ten_minutes(
    session_factory, settings, monkeypatch
):
    minute_start = NOW.replace(second=0)
    with session_factory() as session:
        for back in range(75):  # one login code a minute, each 2 min late, for 75 min
            at = minute_start - dt.timedelta(minutes=back) + dt.timedelta(seconds=10)
            accepted(session, lane=CRITICAL, latency=120, at=at)
            accepted(session, lane=BULK, latency=60, at=at, template="welcome")
        session.commit()
        conditions = latency_conditions(session, settings, NOW)
    assert [c.key for c in conditions] == ["latency:critical"]
    assert conditions[0].details == {"lane": CRITICAL, "target_seconds": 60.0, "slow": 60,
                                     "submitted": 60}  # fmt: skip
    relaxed = {CRITICAL: 300.0, BULK: 900.0}
    monkeypatch.setattr(delivery_figures, "LANE_LATENCY_TARGETS", relaxed)
    with session_factory() as session:
        assert latency_conditions(session, settings, NOW) == []


def test_a_short_spike_does_not_fire_and_a_template_may_set_its_own_target(
    session_factory, settings
):
    minute_start = NOW.replace(second=0)
    with session_factory() as session:
        for back in range(75):
            at = minute_start - dt.timedelta(minutes=back) + dt.timedelta(seconds=10)
            accepted(session, lane=CRITICAL, latency=120 if back < 5 else 2, at=at)
        session.commit()
        assert latency_conditions(session, settings, NOW) == []
        hour = (NOW - dt.timedelta(hours=1), NOW)
        lanes = {CRITICAL: 60.0, BULK: 900.0}
        slow = over_target_by_minute(session, *hour, lanes, {})
        assert sum(over for _, over in slow.values()) == 5
        own = over_target_by_minute(session, *hour, lanes, {"login-code": 300.0})
        assert sum(over for _, over in own.values()) == 0


def test_the_p99_rule_matches_the_nearest_rank():
    current = 1000
    for submitted, slow, expected in [(1, 1, True), (100, 1, False), (100, 2, True),
                                      (150, 2, True), (150, 1, False)]:  # fmt: skip
        counts = {minute: (0, 0) for minute in range(current - 70, current + 1)}
        for back in range(delivery_figures.HOLD_MINUTES + 1):
            counts[current - back] = (0, 0)
        counts[current - delivery_figures.HOLD_MINUTES] = (submitted, slow)
        assert delivery_figures._windows_over_target(counts, current) is expected
        latencies = sorted([1.0] * (submitted - slow) + [9.0] * slow)
        assert (latencies[math.ceil(0.99 * submitted) - 1] > 5.0) is expected


def test_the_dashboard_shows_p50_p99_targets_and_duplicates(app, console_client):
    from console.web.extensions import db

    with app.app_context():
        now = utcnow()
        for seconds in (1, 2, 3, 200):
            accepted(db.session, lane=CRITICAL, latency=seconds, at=now - dt.timedelta(minutes=1))
        first = accepted(db.session, lane=BULK, latency=30, at=now - dt.timedelta(minutes=1),
                         template="welcome")  # fmt: skip
        for number in (1, 2):
            received_at = now - dt.timedelta(seconds=number)
            db.session.add(ProviderEvent(source="ses", source_event_id=f"d{number}",
                                         event_type="delivered", intent_id=first,
                                         received_at=received_at))  # fmt: skip
        db.session.commit()
    page = console_client("viewer").get("/").text
    assert 'id="latency-p50-critical">2.0 s<' in page
    assert 'id="latency-p99-critical" data-over-target="yes"' in page
    assert 'id="latency-p50-bulk">30.0 s<' in page
    assert "Sends that may have reached a person twice, last 24 h: <strong>1</strong>" in page
    metrics = console_client("admin").get("/metrics").text
    assert "# TYPE console_enqueue_to_accepted_seconds histogram" in metrics
    assert 'console_possible_duplicate_sends_total{cause="second_delivery"} 0.0' in metrics
