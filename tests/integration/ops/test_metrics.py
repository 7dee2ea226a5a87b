"""/metrics and /healthz: content, caching, and answers when parts are down."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update
from sqlalchemy.orm import Session

from console.app import create_app
from console.models import Intent, ProviderEvent, Suppression, utcnow
from console.ops.metrics import prometheus
from console.outbox import enqueue
from console.state_tables import LaneBreaker, WorkerHeartbeat
from console.vocabulary import AMBIGUOUS, DEAD, SUBMITTED
from console.web import ops
from console.web.extensions import db
from console.worker import reporting
from tests.conftest import TEST_SECRET_KEY
from tests.support.commands import CONSOLE_BIN

_keys = itertools.count(1)


def add_intents(session: Session, template: str, count: int, status: str | None = None) -> None:
    params = {"code": "1"} if template == "login-code" else {"name": "Ada", "login_url": "u"}
    for _ in range(count):
        intent = enqueue(
            session, key=f"k{next(_keys)}", to="ada@example.com", template=template, params=params
        )
        session.flush()
        if status:
            session.execute(update(Intent).where(Intent.id == intent.id).values(status=status))


def add_heartbeat(session: Session, age_seconds: float, worker_id: str = "w1") -> None:
    now = utcnow()
    tick = now - dt.timedelta(seconds=age_seconds)
    session.merge(WorkerHeartbeat(worker_id=worker_id, started_at=tick, last_tick_at=tick))


def samples(body: str) -> dict[tuple[str, tuple], float]:
    """Map (sample name, sorted labels) to value."""
    found = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


@pytest.fixture
def seeded(app):
    with app.app_context():
        session = db.session
        add_intents(session, "welcome", 3)
        add_intents(session, "login-code", 1)
        add_intents(session, "welcome", 2, SUBMITTED)
        add_intents(session, "login-code", 1, AMBIGUOUS)
        add_intents(session, "welcome", 1, DEAD)
        session.execute(
            update(Intent)
            .where(Intent.template == "login-code", Intent.status == "pending")
            .values(created_at=utcnow() - dt.timedelta(seconds=90))
        )
        now = utcnow()
        session.add_all(
            [
                Suppression(recipient="x@example.com", reason="bounce", created_at=now),
                Suppression(recipient="y@example.com", reason="manual", created_at=now),
                ProviderEvent(
                    source="ses", source_event_id="e1", event_type="delivered", received_at=now
                ),
                ProviderEvent(
                    source="ses", source_event_id="e2", event_type="delivered", received_at=now
                ),
                ProviderEvent(
                    source="ses",
                    source_event_id="old",
                    event_type="bounced",
                    received_at=now - dt.timedelta(hours=3),
                ),
                LaneBreaker(lane="bulk", state="open", failure_rate=0.8, updated_at=now),
            ]
        )
        add_heartbeat(session, age_seconds=2)
        session.commit()
    return app


def test_metrics_report_the_queue_without_login(seeded):
    response = seeded.test_client().get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    found = samples(response.get_data(as_text=True))
    intents = {k[1]: v for k, v in found.items() if k[0] == "console_intents"}
    assert intents[(("lane", "bulk"), ("status", "pending"))] == 3
    assert intents[(("lane", "critical"), ("status", "pending"))] == 1
    assert intents[(("lane", "bulk"), ("status", "submitted"))] == 2
    assert found[("console_ambiguous_intents", ())] == 1
    assert found[("console_dead_intents", ())] == 1
    assert 89 <= found[("console_oldest_pending_age_seconds", (("lane", "critical"),))] < 150
    assert found[("console_oldest_pending_age_seconds", (("lane", "bulk"),))] < 30
    assert found[("console_suppressions", (("reason", "bounce"),))] == 1
    assert found[("console_suppressions", (("reason", "manual"),))] == 1
    events = {k[1]: v for k, v in found.items() if k[0] == "console_provider_events_last_hour"}
    assert events == {(("type", "delivered"),): 2}
    assert found[("console_workers_alive", ())] == 1
    assert found[("console_last_tick_age_seconds", ())] < 30
    assert found[("console_lane_paused", (("lane", "bulk"),))] == 1
    assert found[("console_lane_paused", (("lane", "critical"),))] == 0
    assert found[("console_lane_failure_rate", (("lane", "bulk"),))] == 0.8
    assert found[("console_database_up", ())] == 1


def test_metrics_include_this_process_instruments(seeded):
    before = samples(seeded.test_client().get("/metrics").get_data(as_text=True))
    reporting.record_attempt("transient", "bulk", 0.2)
    reporting.record_attempt("accepted", "bulk", 0.03)
    reporting.record_attempt("transient", "bulk", 0.4)  # the same child counts again
    reporting.record_tick()
    after = samples(seeded.test_client().get("/metrics").get_data(as_text=True))

    def grew(name, labels=()):
        return after[(name, labels)] - before.get((name, labels), 0)

    assert grew("console_attempts_total", (("outcome", "transient"),)) == 2
    assert grew("console_attempts_total", (("outcome", "accepted"),)) == 1
    assert grew("console_worker_ticks_total") == 1
    assert grew("console_send_latency_seconds_count", (("lane", "bulk"),)) == 3
    assert grew("console_send_latency_seconds_bucket", (("lane", "bulk"), ("le", "0.05"))) == 1
    assert ("process_resident_memory_bytes", ()) in after


def test_snapshot_is_cached_for_the_configured_time(seeded):
    now = [0.0]
    with seeded.app_context():
        cache = prometheus.SnapshotCache(
            lambda: Session(db.engine),
            cache_seconds=10,
            alive_within_seconds=60,
            clock=lambda: now[0],
        )
        assert cache.get().count("dead") == 1
        add_intents(db.session, "welcome", 2, DEAD)
        db.session.commit()
        now[0] = 9.9
        assert cache.get().count("dead") == 1
        now[0] = 10.0
        assert cache.get().count("dead") == 3


def test_live_statuses_are_fresh_while_the_full_count_waits_a_minute(seeded):
    now = [0.0]
    with seeded.app_context():
        cache = prometheus.SnapshotCache(
            lambda: Session(db.engine),
            cache_seconds=10,
            alive_within_seconds=60,
            clock=lambda: now[0],
        )
        first = cache.get()
        assert (first.count("submitted"), first.count("pending")) == (2, 4)
        add_intents(db.session, "welcome", 3, SUBMITTED)
        add_intents(db.session, "welcome", 1)
        db.session.commit()
        now[0] = 10.0
        second = cache.get()
        assert second.count("pending") == 5, "live statuses are counted at every refresh"
        assert second.count("submitted") == 2, "the full count is kept for a minute"
        now[0] = prometheus.TOTALS_MIN_SECONDS
        assert cache.get().count("submitted") == 5


def test_metrics_without_a_database_still_serve_process_instruments(tmp_path):
    engine_url = "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2"
    app = create_app({"CONSOLE_DATABASE_URL": engine_url, "CONSOLE_SECRET_KEY": TEST_SECRET_KEY})
    response = app.test_client().get("/metrics")
    assert response.status_code == 200
    found = samples(response.get_data(as_text=True))
    assert found[("console_database_up", ())] == 0
    assert ("console_intents", (("lane", "bulk"), ("status", "pending"))) not in found
    health = app.test_client().get("/healthz")
    assert health.status_code == 503
    assert health.get_json()["database"] == "unreachable"
    assert "nobody" not in health.get_data(as_text=True)


def test_healthz_ok_with_a_recent_tick(app):
    with app.app_context():
        add_heartbeat(db.session, age_seconds=1)
        db.session.commit()
    response = app.test_client().get("/healthz")
    assert response.status_code == 200
    report = response.get_json()
    assert report["status"] == "ok" and report["database"] == "ok"
    assert report["last_tick_age_seconds"] < 30


def test_healthz_fails_before_any_tick(app):
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["problems"] == ["no worker has ticked yet"]


def test_healthz_fails_on_a_stale_tick(app):
    with app.app_context():
        add_heartbeat(db.session, age_seconds=600)
        db.session.commit()
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["problems"][0].startswith("last worker tick")


class _Scheduler:
    running = False


def test_healthz_fails_when_this_process_scheduler_stopped(app):
    with app.app_context():
        add_heartbeat(db.session, age_seconds=1)
        db.session.commit()
    app.extensions[ops.SCHEDULER_EXTENSION] = _Scheduler()
    response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.get_json()["scheduler"] == "stopped"
    _Scheduler.running = True
    try:
        assert app.test_client().get("/healthz").status_code == 200
    finally:
        _Scheduler.running = False


def test_a_standalone_worker_serves_its_own_metrics(sqlite_url, tmp_path):
    import os
    import signal
    import subprocess
    import time
    import urllib.error
    import urllib.request

    from console.store.database import make_engine
    from tests.support.pgcluster import free_port
    from tests.support.smtp_server import ScriptedSMTPServer

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        add_intents(session, "welcome", 2)
        session.commit()
    port = free_port()
    with ScriptedSMTPServer() as smtp:
        env = {
            **os.environ,
            "CONSOLE_DATABASE_URL": sqlite_url,
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "CONSOLE_SMTP_URL": smtp.url,
            "CONSOLE_POLL_SECONDS": "0.2",
            "CONSOLE_METRICS_CACHE_SECONDS": "0",
            "CONSOLE_WORKER_METRICS_PORT": str(port),
        }
        worker = subprocess.Popen(
            [CONSOLE_BIN, "worker"], env=env, cwd=tmp_path, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 30
            found = {}
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as page:
                        found = samples(page.read().decode())
                except OSError:
                    pass
                if found.get(("console_attempts_total", (("outcome", "accepted"),))) == 2:
                    break
                time.sleep(0.2)
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz")
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=30)
    engine.dispose()
    assert found[("console_attempts_total", (("outcome", "accepted"),))] == 2
    assert found[("console_worker_ticks_total", ())] >= 1
    assert found[("console_send_latency_seconds_count", (("lane", "bulk"),))] == 2
    assert found[("console_database_up", ())] == 1
    assert found[("console_intents", (("lane", "bulk"), ("status", "submitted")))] == 2
    assert missing.value.code == 404
