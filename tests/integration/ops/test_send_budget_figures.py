"""The send budget on the dashboard, in /metrics and in the alert cycle: the quota's alert
fires once and says until when; the gauges show the rate, the tokens and the day's count."""

from __future__ import annotations

import datetime as dt

from console.config import load_settings
from console.ops.alerts import cycle
from console.ops.metrics.send_budget_figures import SEND_QUOTA_REACHED, budget_figures
from console.store import send_budget

NOW = dt.datetime(2026, 12, 10, 12, 30, tzinfo=dt.UTC)


def settings_for(tmp_path, **variables):
    environ = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 32, **variables}
    return load_settings(environ, instance_path=tmp_path)


def test_the_quota_alert_fires_once_and_says_until_when(session_factory, tmp_path):
    settings = settings_for(tmp_path, CONSOLE_SEND_DAILY_QUOTA="50")
    assert cycle.run_alert_cycle(session_factory, settings, now=NOW).fired == []
    with session_factory() as session:
        send_budget.count_sent(session, (NOW - dt.timedelta(hours=3)).timestamp(), 40)
        send_budget.count_sent(session, NOW.timestamp(), 7)
        session.commit()
        figures = budget_figures(session, settings, NOW)
    assert figures.sent_24h == 47 and figures.quota == 50 and figures.critical_reserve == 3
    assert figures.bulk_waits_until == dt.datetime(2026, 12, 11, 10, 0, tzinfo=dt.UTC)
    assert cycle.run_alert_cycle(session_factory, settings, now=NOW).fired == [SEND_QUOTA_REACHED]
    later = NOW + dt.timedelta(minutes=5)
    assert cycle.run_alert_cycle(session_factory, settings, now=later).fired == []
    next_day = NOW + dt.timedelta(hours=22)
    cleared = cycle.run_alert_cycle(session_factory, settings, now=next_day).cleared
    assert cleared == [SEND_QUOTA_REACHED]


def test_the_dashboard_and_metrics_show_the_budget(db_url, session_factory):
    from werkzeug.security import generate_password_hash

    from console.app import create_app
    from console.models import OperatorUser, utcnow
    from console.web.extensions import db
    from tests.conftest import TEST_SECRET_KEY

    now = utcnow()
    with session_factory() as session:
        send_budget.count_sent(session, now.timestamp(), 48)
        session.commit()
    app = create_app(
        {
            "CONSOLE_DATABASE_URL": db_url,
            "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
            "TESTING": True,
            "CONSOLE_SEND_RATE": "14",
            "CONSOLE_SEND_DAILY_QUOTA": "50",
        }
    )
    with app.app_context():
        password = generate_password_hash("correct horse", method="pbkdf2:sha256:1000")
        db.session.add(OperatorUser(username="ada", password_hash=password, role="viewer",
                                    active=True, created_at=now))  # fmt: skip
        db.session.commit()
    client = app.test_client()
    with client.session_transaction() as flask_session:
        flask_session["_csrf_token"] = "t"
    form = {"username": "ada", "password": "correct horse", "csrf_token": "t"}
    assert client.post("/login", data=form).status_code in (302, 303)
    page = client.get("/").get_data(as_text=True)
    assert "14/s configured, 14/s in force" in page
    assert "sent in the last 24 h: 48 of 50" in page
    assert "The daily send quota is reached" in page and "bulk mail waits until" in page
    exposition = client.get("/metrics").get_data(as_text=True)
    assert "console_send_rate 14.0" in exposition
    assert "console_send_daily_sent 48.0" in exposition
    assert "console_send_daily_quota 50.0" in exposition
    assert "console_send_tokens 0.0" in exposition  # no claim yet: the first finds none
    with app.app_context():
        db.engine.dispose()
