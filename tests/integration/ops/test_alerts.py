"""Alerts: each condition fires once until it clears, to a real webhook and the outbox."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import threading

import pytest
from sqlalchemy import select, update

from console.mail.catalog import TemplateCatalog
from console.models import Attempt, Intent, utcnow
from console.ops.alerts import checks, cycle
from console.ops.alerts.firing import ALERT_TEMPLATE
from console.ops.alerts.webhook import WEBHOOK_RETRY_SECONDS
from console.outbox import enqueue
from console.paths import EMAIL_TEMPLATES_DIR
from console.state_tables import AlertState, LaneBreaker
from console.store.alerts import load_firing_alerts
from console.vocabulary import AMBIGUOUS, CRITICAL, DEAD
from tests.support.alert_webhook import Webhook, settings_for
from tests.support.pgcluster import free_port

_keys = itertools.count(1)
NOW = utcnow()
ALERT_EMAIL = "oncall@example.com"


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


def add_intent(session, status="pending", template="login-code", **values) -> Intent:
    params = {"code": "1"} if template == "login-code" else {"name": "A", "login_url": "u"}
    intent = enqueue(
        session, key=f"k{next(_keys)}", to="ada@example.com", template=template, params=params
    )
    session.flush()
    session.execute(update(Intent).where(Intent.id == intent.id).values(status=status, **values))
    return intent


def alert_emails(session_factory) -> list[Intent]:
    with session_factory() as session:
        query = select(Intent).where(Intent.template == ALERT_TEMPLATE)
        return list(session.execute(query).scalars())


def test_nothing_fires_on_a_healthy_queue(session_factory, tmp_path, webhook):
    settings = settings_for(tmp_path, CONSOLE_ALERT_WEBHOOK_URL=webhook.url)
    with session_factory() as session:
        add_intent(session, "submitted")
        add_intent(session, "pending")
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert report.fired == [] and webhook.received == []


def test_a_dead_letter_alerts_once_until_it_clears(session_factory, tmp_path, webhook):
    settings = settings_for(
        tmp_path,
        CONSOLE_ALERT_WEBHOOK_URL=webhook.url,
        CONSOLE_ALERT_EMAIL=ALERT_EMAIL,
        CONSOLE_ALERT_DEAD_WINDOW_SECONDS="3600",
    )
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=NOW - dt.timedelta(seconds=5))
        session.commit()

    first = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert first.fired == [checks.DEAD_LETTER] and first.webhooks_sent == 1
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=NOW)  # a second dead letter: same condition
        session.commit()
    for minutes in (1, 2, 3):
        later = NOW + dt.timedelta(minutes=minutes)
        assert cycle.run_alert_cycle(session_factory, settings, now=later).fired == []
    assert webhook.states() == [(checks.DEAD_LETTER, "firing")]
    assert webhook.received[0]["details"]["count"] == 1
    (email,) = alert_emails(session_factory)
    assert email.recipient == ALERT_EMAIL and email.lane == CRITICAL
    assert email.params["condition"] == checks.DEAD_LETTER

    after_window = NOW + dt.timedelta(seconds=3601)
    cleared = cycle.run_alert_cycle(session_factory, settings, now=after_window)
    assert cleared.cleared == [checks.DEAD_LETTER]
    assert webhook.states()[-1] == (checks.DEAD_LETTER, "resolved")
    assert webhook.received[-1]["cleared_at"] is not None

    with session_factory() as session:
        add_intent(session, DEAD, updated_at=after_window)
        session.commit()
    again = cycle.run_alert_cycle(session_factory, settings, now=after_window)
    assert again.fired == [checks.DEAD_LETTER]
    assert len(alert_emails(session_factory)) == 2


def test_concurrent_evaluators_notify_exactly_once(session_factory, tmp_path, webhook):
    settings = settings_for(
        tmp_path, CONSOLE_ALERT_WEBHOOK_URL=webhook.url, CONSOLE_ALERT_EMAIL=ALERT_EMAIL
    )
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=NOW)
        session.commit()
    barrier = threading.Barrier(4)
    reports, errors = [], []

    def evaluate() -> None:
        barrier.wait()
        try:
            reports.append(cycle.run_alert_cycle(session_factory, settings, now=NOW))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=evaluate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sum(len(r.fired) for r in reports) == 1
    assert webhook.states() == [(checks.DEAD_LETTER, "firing")]
    assert len(alert_emails(session_factory)) == 1


def test_ambiguous_intents_alert_only_after_the_threshold(session_factory, tmp_path):
    settings = settings_for(tmp_path, CONSOLE_ALERT_AMBIGUOUS_AFTER_SECONDS="600")
    with session_factory() as session:
        add_intent(session, AMBIGUOUS, updated_at=NOW - dt.timedelta(seconds=300))
        session.commit()
    assert cycle.run_alert_cycle(session_factory, settings, now=NOW).fired == []
    later = NOW + dt.timedelta(seconds=301)
    report = cycle.run_alert_cycle(session_factory, settings, now=later)
    assert report.fired == [checks.AMBIGUOUS_WAITING]
    with session_factory() as session:
        (state,) = load_firing_alerts(session)
        assert state.details == {"count": 1, "oldest_wait_seconds": 601}


def test_pending_age_uses_the_template_target_or_the_lane_default(session_factory, tmp_path):
    catalog_root = tmp_path / "email"
    catalog_root.mkdir()
    for name in ("login-code", "welcome"):
        (catalog_root / name).symlink_to(EMAIL_TEMPLATES_DIR / name)
    settings = settings_for(
        tmp_path,
        CONSOLE_ALERT_PENDING_AGE_CRITICAL_SECONDS="120",
        CONSOLE_ALERT_PENDING_AGE_BULK_SECONDS="3600",
    )
    with session_factory() as session:
        add_intent(session, template="login-code", created_at=NOW - dt.timedelta(seconds=200))
        add_intent(session, template="welcome", created_at=NOW - dt.timedelta(seconds=200))
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert report.fired == ["pending_age:login-code"]

    custom = TemplateCatalog(root=tmp_path / "custom")
    (tmp_path / "custom").mkdir()
    (tmp_path / "custom" / "welcome").mkdir()
    (tmp_path / "custom" / "welcome" / "settings.toml").write_text(
        'current_version = 1\nlane = "bulk"\npending_age_target_seconds = 60\n'
    )
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW, catalog=custom)
    assert report.fired == ["pending_age:welcome"]
    assert report.cleared == []  # login-code still above the critical default


def test_breaker_and_provider_credentials_alert(session_factory, tmp_path):
    settings = settings_for(tmp_path, CONSOLE_ALERT_AUTH_WINDOW_SECONDS="900")
    with session_factory() as session:
        intent = add_intent(session, "pending")
        session.add(LaneBreaker(lane="bulk", state="open", failure_rate=0.9, updated_at=NOW))
        session.add(
            Attempt(
                intent_id=intent.id,
                attempt_number=1,
                lease_token="t",
                started_at=NOW - dt.timedelta(seconds=30),
                outcome="permanent",
                reply_code=535,
            )
        )
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert sorted(report.fired) == ["breaker_open:bulk", checks.PROVIDER_AUTH]
    with session_factory() as session:
        session.execute(update(LaneBreaker).values(state="closed"))
        session.commit()
    later = NOW + dt.timedelta(seconds=901)
    report = cycle.run_alert_cycle(session_factory, settings, now=later)
    assert sorted(report.cleared) == ["breaker_open:bulk", checks.PROVIDER_AUTH]


def test_a_refused_webhook_is_retried_later_not_at_once(session_factory, tmp_path, webhook):
    settings = settings_for(tmp_path, CONSOLE_ALERT_WEBHOOK_URL=webhook.url)
    webhook.status = 500
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=NOW)
        session.commit()
    first = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert (first.webhooks_sent, first.webhooks_failed) == (0, 1)
    soon = NOW + dt.timedelta(seconds=10)
    assert cycle.run_alert_cycle(session_factory, settings, now=soon).webhooks_failed == 0
    webhook.status = 200
    retry_at = NOW + dt.timedelta(seconds=WEBHOOK_RETRY_SECONDS + 1)
    retried = cycle.run_alert_cycle(session_factory, settings, now=retry_at)
    assert retried.webhooks_sent == 1
    assert webhook.states() == [(checks.DEAD_LETTER, "firing")] * 2
    with session_factory() as session:
        state = session.get(AlertState, checks.DEAD_LETTER)
        assert state.webhook_due is None and state.webhook_sent_at is not None


def test_an_unreachable_webhook_fails_within_the_timeout(sqlite_url, tmp_path):
    from console.store.database import make_engine, make_session_factory

    engine = make_engine(sqlite_url)
    session_factory = make_session_factory(engine)
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"
    settings = settings_for(
        tmp_path, CONSOLE_ALERT_WEBHOOK_URL=url, CONSOLE_ALERT_WEBHOOK_TIMEOUT_SECONDS="2"
    )
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=NOW)
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert report.fired == [checks.DEAD_LETTER] and report.webhooks_failed == 1
    engine.dispose()


def test_background_jobs_check_alerts_and_run_retention(sqlite_url, tmp_path):
    import time

    from console.ops.jobs.schedule import OpsJobs
    from console.store.database import make_engine, make_session_factory

    settings = settings_for(tmp_path, CONSOLE_ALERT_INTERVAL_SECONDS="0.2")
    settings = dataclasses.replace(settings, database_url=sqlite_url)
    engine = make_engine(sqlite_url)
    session_factory = make_session_factory(engine)
    with session_factory() as session:
        add_intent(session, DEAD, updated_at=utcnow())
        add_intent(session, "submitted", created_at=utcnow() - dt.timedelta(days=40))
        session.commit()
    jobs = OpsJobs(settings).start(first_retention_delay_seconds=0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with session_factory() as session:
                fired = load_firing_alerts(session)
                scrubbed = session.execute(
                    select(Intent).where(Intent.params_scrubbed_at.is_not(None))
                ).all()
            if fired and scrubbed:
                break
            time.sleep(0.1)
        assert [state.condition for state in fired] == [checks.DEAD_LETTER]
        assert len(scrubbed) == 1
    finally:
        jobs.shutdown()
        engine.dispose()


def test_bounce_and_complaint_rates_over_the_limit_alert(session_factory, tmp_path):
    settings = settings_for(tmp_path)
    recent = NOW - dt.timedelta(hours=1)
    with session_factory() as session:
        for _ in range(98):
            add_intent(session, "submitted", submitted_at=recent)
        add_intent(session, "submitted", submitted_at=recent, complained_at=recent)
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    # 1 complaint in 99 sent is over 0.3 %; no bounce yet
    assert sorted(report.fired) == ["sender_rate:complaint:24h", "sender_rate:complaint:7d"]
    with session_factory() as session:
        bounced = dict(submitted_at=recent, bounced_at=recent, bounce_type="permanent")
        add_intent(session, "submitted", **bounced)
        add_intent(session, "submitted", **bounced)
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    # 2 bounces in 101 sent is under 2 %: nothing new
    assert report.fired == []
    with session_factory() as session:
        add_intent(session, "submitted", **bounced)
        session.commit()
    report = cycle.run_alert_cycle(session_factory, settings, now=NOW)
    assert sorted(report.fired) == ["sender_rate:bounce:24h", "sender_rate:bounce:7d"]
    a_day_later = NOW + dt.timedelta(hours=24)
    report = cycle.run_alert_cycle(session_factory, settings, now=a_day_later)
    assert sorted(report.cleared) == ["sender_rate:bounce:24h", "sender_rate:complaint:24h"]
