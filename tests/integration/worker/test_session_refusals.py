"""Refusals split by what they blame, end to end against the scripted SMTP server.

A refusal of the session (HELO rejected at RCPT, relaying denied, a sender refused at
MAIL) leaves every intent pending and uncharged, opens the lane's breaker and raises an
alert naming the reply; once the relay is fixed the probe goes and the queue drains. A
refusal of the recipient fails that intent only. A relay without SMTPUTF8 fails the
non-ASCII recipient, with one alert per relay.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from console.config import load_settings
from console.models import Attempt, Intent
from console.ops.alerts import cycle
from console.state_tables import AlertState
from console.store.send_guards import read_breakers
from console.transports.smtp import SmtpTransport
from console.vocabulary import CLOSED, FAILED, OPEN, PENDING, SUBMITTED
from console.worker.guard import GuardPolicy
from tests.support.smtp_server import ScriptedSMTPServer

HELO_REFUSED = "rcpt:504 5.5.2 <vm>: Helo command rejected: need fully-qualified hostname"
ORDER = dict(
    template="order-confirmation",
    params={
        "customer_name": "Ada",
        "order_number": "A-1",
        "items": [{"quantity": 1, "name": "Tea", "price": "3.00"}],
        "total": "3.00",
    },
)


def add(session_factory, key, to) -> int:
    from console.outbox import enqueue

    with session_factory() as session:
        intent = enqueue(session, key=key, to=to, **ORDER)
        session.commit()
        return intent.id


def intents(session_factory, ids):
    with session_factory() as session:
        return [session.get(Intent, i) for i in ids]


def attempts_of(session_factory, intent_id):
    with session_factory() as session:
        return session.scalars(select(Attempt).where(Attempt.intent_id == intent_id)).all()


def firing(session_factory) -> dict[str, AlertState]:
    with session_factory() as session:
        rows = session.scalars(select(AlertState).where(AlertState.active.is_(True))).all()
        return {row.condition: row for row in rows}


def alert_settings(tmp_path):
    return load_settings(
        {
            "CONSOLE_DATABASE_URL": "sqlite://",
            "CONSOLE_SECRET_KEY": "k" * 32,
            "CONSOLE_ALERT_PENDING_AGE_CRITICAL_SECONDS": "86400",
            "CONSOLE_ALERT_PENDING_AGE_BULK_SECONDS": "86400",
        },
        instance_path=tmp_path,
    )


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


@pytest.fixture
def smtp_worker(make_worker, smtp_server):
    def build(**options):
        transport = SmtpTransport(smtp_server.url, timeout_seconds=2)
        return make_worker(transport, guard_policy=GuardPolicy(), max_attempts=2, **options)

    return build


def test_a_refused_session_pauses_the_lane_instead_of_failing_the_queue(
    session_factory, smtp_server, smtp_worker, clock, tmp_path
):
    smtp_server.script.set("*", [HELO_REFUSED])
    ids = [add(session_factory, f"order:{n}", f"buyer{n}@example.com") for n in range(4)]
    worker = smtp_worker()

    for _ in range(3):  # more ticks than the attempt cap: nothing may be charged
        worker.run_once()
        clock.advance(1)

    for intent in intents(session_factory, ids):
        assert intent.status == PENDING and intent.attempt_count == 0
        assert attempts_of(session_factory, intent.id) == []
    reasons = [i.status_reason for i in intents(session_factory, ids) if i.status_reason]
    assert len(reasons) == 1, "the one that met the refusal says why; the others never left"
    assert "504" in reasons[0] and "not charged" in reasons[0]
    assert smtp_server.handler.commands["RSET"] == 1, "one refusal; the rest of the lane waited"
    with session_factory() as session:
        assert read_breakers(session)["bulk"].state == OPEN
    alert = firing(session_factory)["relay_refused:bulk"]
    assert "504 5.5.2 <vm>: Helo command rejected" in alert.summary
    settings = alert_settings(tmp_path)
    report = cycle.run_alert_cycle(session_factory, settings, now=clock.now)
    assert "relay_refused:bulk" in firing(session_factory) and not report.cleared

    smtp_server.script.set("*", ["250"])  # the operator fixed the EHLO name
    clock.advance(3600)
    worker.run_once()  # the probe
    with session_factory() as session:
        assert read_breakers(session)["bulk"].state == CLOSED
    clock.advance(3600)
    worker.run_once()
    statuses = [intent.status for intent in intents(session_factory, ids)]
    assert statuses == [SUBMITTED] * 4
    assert [i.attempt_count for i in intents(session_factory, ids)] == [1] * 4
    report = cycle.run_alert_cycle(session_factory, settings, now=clock.now)
    assert "relay_refused:bulk" in report.cleared


@pytest.mark.parametrize(
    "behaviour",
    ["rcpt:554 5.7.1 <x@elsewhere.example>: Relay access denied", "rcpt:535 5.7.8 bad creds"],
)
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_relaying_denied_and_credentials_pause_too(
    behaviour, session_factory, smtp_server, smtp_worker
):
    smtp_server.script.set("*", [behaviour])
    intent_id = add(session_factory, "order:1", "ada@example.com")
    smtp_worker().run_once()
    (intent,) = intents(session_factory, [intent_id])
    assert intent.status == PENDING and intent.attempt_count == 0
    assert list(firing(session_factory)) == ["relay_refused:bulk"]


def test_a_refused_recipient_fails_that_intent_only(session_factory, smtp_server, smtp_worker):
    smtp_server.script.set("gone@example.com", ["rcpt:550 5.1.1 <gone@example.com>: unknown"])
    gone = add(session_factory, "order:1", "gone@example.com")
    fine = add(session_factory, "order:2", "ada@example.com")
    smtp_worker().run_once()
    assert [i.status for i in intents(session_factory, [gone, fine])] == [FAILED, SUBMITTED]
    assert firing(session_factory) == {}
    with session_factory() as session:
        assert read_breakers(session)["bulk"].state == CLOSED


def test_a_relay_without_smtputf8_fails_the_address_with_one_alert(
    session_factory, make_worker, clock
):
    with ScriptedSMTPServer(smtputf8=False) as server:
        transport = SmtpTransport(server.url, timeout_seconds=2)
        worker = make_worker(transport, guard_policy=GuardPolicy())
        ids = [add(session_factory, "order:1", "zoë@example.com")]
        ids += [add(session_factory, "order:2", "josé@example.com")]
        ids += [add(session_factory, "order:3", "ada@example.com")]
        worker.run_once()
        zoe, jose, ada = intents(session_factory, ids)
        assert zoe.status == jose.status == FAILED and ada.status == SUBMITTED
        assert "SMTPUTF8" in zoe.status_reason
        alert_keys = list(firing(session_factory))
        assert alert_keys == [f"smtputf8_missing:127.0.0.1:{server.port}"]
        with session_factory() as session:
            assert read_breakers(session)["bulk"].state == CLOSED
        assert server.connections_opened == 1
