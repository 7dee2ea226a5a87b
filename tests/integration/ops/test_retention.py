"""Retention: params scrubbed and replies/payloads trimmed in batches, the trace kept."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess

from sqlalchemy import select, text, update

from console.models import Attempt, Intent, ProviderEvent, utcnow
from console.ops.jobs.retention import prune
from console.outbox import enqueue
from console.vocabulary import DEAD, PENDING, SUBMITTED
from tests.support.commands import CONSOLE_BIN

_numbers = itertools.count(1)
NOW = utcnow()
OLD = NOW - dt.timedelta(days=40)
RECENT = NOW - dt.timedelta(days=2)


def add_intent(session, status: str, created_at: dt.datetime) -> int:
    """Store an intent with one attempt and one provider event; return its id."""
    number = next(_numbers)
    intent = enqueue(
        session,
        key=f"order:{number}",
        to="ada@example.com",
        template="login-code",
        params={"code": f"SECRET-{number}"},
    )
    session.flush()
    session.execute(
        update(Intent)
        .where(Intent.id == intent.id)
        .values(status=status, created_at=created_at, provider_message_id=f"relay-{number}")
    )
    session.add(
        Attempt(
            intent_id=intent.id,
            attempt_number=1,
            lease_token="t",
            started_at=created_at,
            finished_at=created_at,
            outcome="accepted",
            reply_code=250,
            reply_text=f"2.0.0 Ok: queued as relay-{number}",
            provider_message_id=f"relay-{number}",
        )
    )
    session.add(
        ProviderEvent(
            source="ses",
            source_event_id=f"ev-{number}",
            event_type="delivered",
            intent_id=intent.id,
            provider_message_id=f"relay-{number}",
            received_at=created_at,
            payload={"mail": {"destination": ["ada@example.com"]}, "number": number},
        )
    )
    return intent.id


def test_old_finished_intents_lose_params_and_keep_their_trace(session_factory):
    with session_factory() as session:
        old_done = add_intent(session, SUBMITTED, OLD)
        old_dead = add_intent(session, DEAD, OLD)
        old_waiting = add_intent(session, PENDING, OLD)
        recent_done = add_intent(session, SUBMITTED, RECENT)
        session.commit()

    report = prune(session_factory, retention_days=30, now=NOW)

    assert report.intents_scrubbed == 2 and report.attempts_trimmed == 2
    assert report.events_trimmed == 3  # received before the cutoff, whatever the intent
    with session_factory() as session:
        rows = {i.id: i for i in session.execute(select(Intent)).scalars()}
        for scrubbed in (old_done, old_dead):
            intent = rows[scrubbed]
            assert intent.params is None and intent.params_scrubbed_at == NOW
            assert intent.message_id.startswith("<") and intent.provider_message_id
            assert intent.created_at == OLD and intent.status in (SUBMITTED, DEAD)
        assert rows[old_waiting].params["code"].startswith("SECRET-")
        assert rows[old_waiting].params_scrubbed_at is None
        assert rows[recent_done].params["code"].startswith("SECRET-")
        attempts = {a.intent_id: a for a in session.execute(select(Attempt)).scalars()}
        assert attempts[old_done].reply_text is None
        assert attempts[old_done].reply_code == 250
        assert attempts[old_done].provider_message_id.startswith("relay-")
        assert attempts[old_done].started_at == OLD
        assert attempts[old_waiting].reply_text is not None
        events = {e.intent_id: e for e in session.execute(select(ProviderEvent)).scalars()}
        assert events[old_done].payload is None
        assert events[old_done].event_type == "delivered" and events[old_done].received_at == OLD
        assert events[recent_done].payload["number"] > 0
        leftover = session.execute(
            text("SELECT count(*) FROM email_intent WHERE params IS NULL")
        ).scalar_one()
        assert leftover == 2, "scrubbed params are SQL NULL, not a JSON null"


def test_work_goes_in_batches_and_a_second_pass_finds_nothing(session_factory):
    with session_factory() as session:
        for _ in range(5):
            add_intent(session, SUBMITTED, OLD)
        session.commit()

    first = prune(session_factory, retention_days=30, batch_size=2, now=NOW)
    assert first.intents_scrubbed == 5 and first.events_trimmed == 5
    assert first.batches == 3 + 3  # 2 + 2 + 1 intents, then 2 + 2 + 1 events
    second = prune(session_factory, retention_days=30, batch_size=2, now=NOW)
    assert (second.intents_scrubbed, second.attempts_trimmed, second.events_trimmed) == (0, 0, 0)


def test_prune_command_reports_what_it_did(db_url, tmp_path):
    from sqlalchemy.orm import Session

    from console.store.database import make_engine

    engine = make_engine(db_url)
    with Session(engine) as session:
        add_intent(session, SUBMITTED, OLD)
        add_intent(session, SUBMITTED, RECENT)
        session.commit()
    env = {**os.environ, "CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": "k" * 32}
    result = subprocess.run(
        [CONSOLE_BIN, "prune", "--days", "30", "--batch-size", "10"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "scrubbed 1 intent, trimmed 1 attempt reply and 1 event payload" in result.stdout
    with Session(engine) as session:
        scrubbed = session.execute(select(Intent).where(Intent.params.is_(None))).scalars().all()
        assert len(scrubbed) == 1 and scrubbed[0].created_at < NOW - dt.timedelta(days=30)
    engine.dispose()


def test_prune_command_refuses_a_bad_period(sqlite_url, tmp_path):
    env = {**os.environ, "CONSOLE_DATABASE_URL": sqlite_url, "CONSOLE_SECRET_KEY": "k" * 32}
    result = subprocess.run(
        [CONSOLE_BIN, "prune", "--days", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--days" in result.stderr
