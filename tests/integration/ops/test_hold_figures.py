"""Holds in /metrics (held intents per hold) and in the alert job (a reminder once a day
while a hold older than a day is still set)."""

from __future__ import annotations

import datetime as dt

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.orm import Session

from console.models import utcnow
from console.ops.alerts.cycle import run_alert_cycle
from console.ops.metrics.hold_figures import HOLD_SET
from console.store import holds
from tests.support.alert_webhook import Webhook, settings_for
from tests.support.orders import enqueue_orders


def place(session, kind, text, now, reason="broken link"):
    return holds.place_hold(
        session, holds.Selector.parse(kind, text), actor="ops", reason=reason, now=now
    )


def held_samples(body: str) -> dict[tuple[str, str], float]:
    return {
        (sample.labels["kind"], sample.labels["held"]): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "console_held_intents"
    }


def test_metrics_count_the_intents_waiting_behind_each_hold(app):
    from console.web.extensions import db

    with app.app_context():
        place(db.session, "domain", "bouncy.example", utcnow())
        place(db.session, "template", "welcome@2", utcnow())
        db.session.commit()
        enqueue_orders(
            lambda: Session(db.engine), ["a@bouncy.example", "b@bouncy.example", "c@x.org"]
        )
    body = app.test_client().get("/metrics").get_data(as_text=True)
    assert held_samples(body) == {("domain", "bouncy.example"): 2, ("template", "welcome@2"): 0}


def test_a_hold_older_than_a_day_reminds_once_a_day_until_released(session_factory, tmp_path):
    hook = Webhook()
    try:
        settings = settings_for(tmp_path, CONSOLE_ALERT_WEBHOOK_URL=hook.url)
        start = utcnow()
        with session_factory() as session:
            hold_id = place(session, "lane", "bulk", start, reason="relay review").id
            session.commit()

        def cycle(hours: float):
            return run_alert_cycle(session_factory, settings, now=start + dt.timedelta(hours=hours))

        assert cycle(23).fired == []
        assert cycle(25).fired == [f"{HOLD_SET}:{hold_id}:1"]
        assert cycle(30).fired == [] and cycle(47).fired == []
        assert cycle(49).fired == [f"{HOLD_SET}:{hold_id}:2"]
        firing = [body for body in hook.received if body["state"] == "firing"]
        assert len(firing) == 2
        assert "lane bulk has been held for 2 day(s)" in firing[-1]["summary"]
        assert "relay review" in firing[-1]["summary"]

        with session_factory() as session:
            holds.release_hold(
                session, hold_id, actor="ops", reason=None, now=start + dt.timedelta(hours=50)
            )
            session.commit()
        report = cycle(51)
        assert report.fired == [] and report.cleared == [f"{HOLD_SET}:{hold_id}:2"]
        assert cycle(80).fired == []
    finally:
        hook.close()
