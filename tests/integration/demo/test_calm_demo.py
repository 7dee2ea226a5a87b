"""A calm demo: what it stages raises no error line; log lines word figures as the pages do."""

from __future__ import annotations

import datetime as dt
import io
import logging
import types

import pytest

from console.core.lifecycle import Decision
from console.core.send_result import SendResult
from console.demo import command
from console.models import utcnow
from console.ops.alerts import cycle
from console.outbox import enqueue
from console.transports.memory import MemoryTransport
from console.vocabulary import DATA_SENT, DEAD, PENDING
from console.worker import reporting
from tests.support.alert_webhook import settings_for

TEMPFAIL = SendResult(DATA_SENT, code=451, reply_text="4.3.0 try again later")


@pytest.fixture
def terminal():
    """The demo's terminal, written to a buffer; the test's logging put back after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    yield buffer
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_the_demos_staged_history_raises_no_error_line(
    terminal, tmp_path, session_factory, make_worker, clock
):
    settings = settings_for(tmp_path)
    command.terminal_logging(settings, stream=terminal)
    with session_factory() as session:
        command.seed_demo(session)
    clock.set(utcnow() + dt.timedelta(seconds=1))  # all the seeded mail due, however slow the seed
    worker = make_worker(MemoryTransport({"tempfail.old@example.net": [TEMPFAIL]}))
    worker.run_once(clock())
    report = cycle.run_alert_cycle(session_factory, settings, now=clock())
    assert {"dead_letter", "sender_rate:bounce:24h"} <= set(report.fired)
    shown = terminal.getvalue()
    assert " error " not in shown and "retry_in" not in shown, shown


def test_the_banner_says_once_what_the_demo_staged(app, capsys):
    smtp = types.SimpleNamespace(url="smtp://127.0.0.1:2525")
    command._banner("127.0.0.1", 5000, smtp, app, [], "<a@b>")
    banner = capsys.readouterr().out
    (line,) = [line for line in banner.splitlines() if "staged" in line]
    assert "dead letter" in line and "bounce" in line and "complaint" in line


def test_alert_summaries_word_figures_as_the_dashboard(session_factory, tmp_path):
    settings = settings_for(tmp_path)
    now = utcnow()
    recent = now - dt.timedelta(hours=1)
    with session_factory() as session:
        for number in range(16):
            intent = enqueue(session, key=f"k{number}", to="ada@example.com",
                             template="login-code", params={"code": "1"})  # fmt: skip
            intent.status, intent.submitted_at = "submitted", recent
            if number == 0:
                intent.bounced_at, intent.bounce_type = recent, "permanent"
        intent.status, intent.updated_at = DEAD, now
        session.commit()
    with session_factory() as session:
        found = {c.key: c.summary for c in cycle.active_conditions(session, settings, now)}
    assert found["dead_letter"] == "1 intent dead-lettered in the last hour"
    assert found["sender_rate:bounce:24h"] == (
        "permanent bounce rate, last 24 h: 6.25 % (1 of 16), limit 2 %"
    )


def test_a_decision_line_names_a_retry_only_when_there_is_one(caplog):
    now = utcnow()
    caplog.set_level(logging.INFO, logger="console.worker.loop")
    dead = Decision(DEAD, "gave up", alert=True)
    reporting.log_decision(dead, 11, 69, DATA_SENT, "transient", 451, now, 1)
    later = Decision(PENDING, "451", now + dt.timedelta(seconds=4))
    reporting.log_decision(later, 12, 70, DATA_SENT, "transient", 451, now, 1)
    first, second = (record.getMessage() for record in caplog.records)
    assert first == "intent=11 attempt=1 stage=data_sent outcome=transient code=451 -> dead"
    assert second.endswith("-> pending, retry in 4 s"), second
