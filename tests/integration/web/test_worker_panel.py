"""The dashboard's worker panel: workers with their last tick, paused lanes, deferred domains."""

from __future__ import annotations

import datetime as dt
import html
import re

from console.models import utcnow
from console.state_tables import DomainDeferral, LaneBreaker, WorkerHeartbeat
from console.web.extensions import db


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def panel(page: str) -> str:
    [section] = re.findall(r'<section class="card" id="workers">(.*?)</section>', page, re.DOTALL)
    return text_of(section)


def test_panel_lists_workers_paused_lanes_and_deferred_domains(app, console_client):
    now = utcnow()
    resume = now + dt.timedelta(minutes=3)
    deferred_until = now + dt.timedelta(minutes=12)
    with app.app_context():
        db.session.add_all(
            [
                WorkerHeartbeat(worker_id="web-1:4242:ab12", host="web-1", pid=4242,
                                started_at=now - dt.timedelta(hours=2),
                                last_tick_at=now - dt.timedelta(seconds=2)),
                WorkerHeartbeat(worker_id="web-2:99:cd34", host="web-2", pid=99,
                                started_at=now - dt.timedelta(days=1),
                                last_tick_at=now - dt.timedelta(minutes=30)),
                LaneBreaker(lane="bulk", state="open", trips=1, failure_rate=0.8,
                            opened_at=now - dt.timedelta(minutes=1), resume_at=resume),
                DomainDeferral(domain="slow.example.net", deferred_until=deferred_until,
                               reply_code=421, updated_at=now),
            ]
        )  # fmt: skip
        db.session.commit()
    page = console_client("viewer").get("/").text
    shown = panel(page)
    assert "1 worker alive" in shown
    assert "web-1:4242:ab12" in shown and "web-1" in shown and "4242" in shown
    assert "2 s ago" in shown or "1 s ago" in shown or "3 s ago" in shown
    assert "web-2:99:cd34" in shown and "stopped ticking" in shown and "30 min ago" in shown
    assert "bulk" in shown and "open" in shown
    assert f"{resume:%Y-%m-%d %H:%M} UTC" in shown and "in 2 min" in shown
    assert "slow.example.net" in shown and "421" in shown
    assert f"{deferred_until:%Y-%m-%d %H:%M} UTC" in shown


def test_panel_without_workers_says_so(console_client):
    shown = panel(console_client("viewer").get("/").text)
    assert "No worker has ticked yet" in shown
    assert "Every lane is running" in shown and "No domain is deferred" in shown


def test_the_htmx_refresh_carries_the_panel(console_client):
    fragment = console_client("viewer").get("/", headers={"HX-Request": "true"}).text
    assert 'id="workers"' in fragment


def test_a_heartbeat_records_the_product_version_and_the_panel_shows_it(app, console_client):
    from importlib import metadata

    from console.store import heartbeats

    now = utcnow()
    with app.app_context():
        beat = dict(host="web-1", pid=1, started_at=now, now=now)
        heartbeats.beat(db.session, worker_id="w-current", **beat)
        heartbeats.beat(db.session, worker_id="w-next", version="0.2.0", **beat)
        heartbeats.beat(db.session, worker_id="w-next", version="0.2.1", **{**beat, "now": now})
        db.session.add(WorkerHeartbeat(worker_id="w-before", host="old", pid=2,
                                       started_at=now, last_tick_at=now))  # fmt: skip
        db.session.commit()
        stored = dict(db.session.query(WorkerHeartbeat.worker_id, WorkerHeartbeat.version).all())
    installed = metadata.version("outbox-console")
    assert stored == {"w-current": installed, "w-next": "0.2.1", "w-before": None}
    page = console_client("viewer").get("/").text
    assert '<th scope="col">version</th>' in page
    shown = panel(page)
    assert "w-current web-1 1" in shown and installed in shown and "0.2.1" in shown
    assert "0.2.0" not in shown, "a worker's next tick writes its new version"
    assert f"Workers run different versions: {installed}, 0.2.1." in shown


def worker_cells(page: str, worker_id: str) -> str:
    [row] = [r for r in re.findall(r"<tr>.*?</tr>", page, re.DOTALL) if worker_id in r]
    return row


def test_a_clean_stop_is_grey_with_its_time_and_a_silent_worker_red(app, console_client):
    from console.store import heartbeats

    now = utcnow()
    earlier, yesterday = now - dt.timedelta(minutes=10), now - dt.timedelta(days=1, minutes=5)
    with app.app_context():
        for worker_id, last_tick in (
            ("w-stopped", earlier),
            ("w-silent", earlier),
            ("w-old-stop", yesterday),
            ("w-alive", now),
        ):
            beat = dict(host="web-1", pid=1, started_at=last_tick, now=last_tick)
            heartbeats.beat(db.session, worker_id=worker_id, **beat)
        heartbeats.record_stop(db.session, worker_id="w-stopped", now=earlier)
        heartbeats.record_stop(db.session, worker_id="w-old-stop", now=yesterday)
        heartbeats.record_stop(db.session, worker_id="w-unknown", now=now)  # writes nothing
        db.session.commit()
        assert db.session.query(WorkerHeartbeat).count() == 4
    page = console_client("viewer").get("/").text
    stopped = worker_cells(page, "w-stopped")
    assert '<span class="status muted"' in stopped and "stopped ticking" not in stopped
    shown = f"{earlier:%H:%M}" if earlier.date() == now.date() else f"{earlier:%Y-%m-%d %H:%M}"
    assert f">stopped at {shown} UTC<" in stopped
    assert f">stopped at {yesterday:%Y-%m-%d %H:%M} UTC<" in worker_cells(page, "w-old-stop")
    silent = worker_cells(page, "w-silent")
    assert '<span class="status status-failed">stopped ticking</span>' in silent
    assert ">alive<" in worker_cells(page, "w-alive")
    assert "1 worker alive" in panel(page)


def test_a_worker_that_ticks_again_is_no_longer_stopped(app):
    from console.store import heartbeats

    now = utcnow()
    with app.app_context():
        beat = dict(worker_id="w-1", host="web-1", pid=1, started_at=now)
        heartbeats.beat(db.session, now=now, **beat)
        heartbeats.record_stop(db.session, worker_id="w-1", now=now)
        db.session.commit()
        assert db.session.get(WorkerHeartbeat, "w-1").stopped_at == now
        heartbeats.beat(db.session, now=now + dt.timedelta(seconds=1), **beat)
        db.session.commit()
        db.session.expire_all()
        assert db.session.get(WorkerHeartbeat, "w-1").stopped_at is None
