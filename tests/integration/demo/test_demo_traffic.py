"""`console demo`'s seeded history and traffic: no false duplicate, a bounded traffic."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from sqlalchemy import func, select

from console.demo import command
from console.demo.traffic import DemoTraffic
from console.events import DELIVERED
from console.models import Intent, ProviderEvent, utcnow
from console.store.duplicate_sends import possible_duplicates
from console.web.extensions import db


@pytest.fixture
def demo_app(db_url):
    app = command.demo_app("smtp://127.0.0.1:2525", db_url, webhook_secret="s3cret-demo")
    yield app
    with app.app_context():
        db.engine.dispose()


def test_a_fresh_demo_reports_no_delivery_twice_also_when_run_again(demo_app):
    with demo_app.app_context():
        for _ in range(2):  # the demo runs again on its database
            command.seed_demo(db.session)
        now = utcnow()
        found = possible_duplicates(db.session, now - dt.timedelta(days=3), now)
        deliveries = db.session.execute(
            select(ProviderEvent.intent_id, func.count())
            .where(ProviderEvent.event_type == DELIVERED, ProviderEvent.intent_id.is_not(None))
            .group_by(ProviderEvent.intent_id)
        ).all()
        sources = set(db.session.scalars(select(ProviderEvent.source)))
    assert found == []
    assert deliveries and all(count == 1 for _, count in deliveries), deliveries
    assert {"ses", "resend", "postmark", "mailgun", "sendgrid", "webhook"} <= sources


def test_the_traffic_queues_its_cases_then_stops(demo_app):
    assigned = []
    traffic = DemoTraffic(
        demo_app, interval_seconds=0.01, cases=3, on_assigned=lambda *n: assigned.append(n)
    )
    traffic.start()
    deadline = time.monotonic() + 10
    while len(assigned) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # ten more intervals: nothing more is queued
    traffic.stop()
    with demo_app.app_context():
        events = list(db.session.scalars(select(Intent.event).where(Intent.event.like("case:%"))))
    assert assigned == [(1, 3), (2, 3), (3, 3)]
    assert len(events) == 3 and all(event.endswith(":assignment:1") for event in events)
