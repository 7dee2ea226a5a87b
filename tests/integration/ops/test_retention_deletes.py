"""Retention that forgets: old finished mail deleted, notes cleared, audit targets hashed.

Rows are aged by SQL (their timestamps set back), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import itertools

from sqlalchemy import func, select, update

from console.core.address_hash import address_hash
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.ops.jobs.retention import prune
from console.outbox import enqueue
from console.vocabulary import (
    CANCELLED,
    DEAD,
    EXPIRED,
    FAILED,
    PENDING,
    SUBMITTED,
    SUPPRESSED,
)
from tests.conftest import TEST_SECRET_KEY

_numbers = itertools.count(1)
NOW = utcnow()
ANCIENT = NOW - dt.timedelta(days=200)  # past the deletion horizon (180)
OLD = NOW - dt.timedelta(days=40)  # past the scrub period (30), within the horizon
RECENT = NOW - dt.timedelta(days=2)


def prune_now(session_factory, **options):
    options.setdefault("retention_days", 30)
    options.setdefault("delete_days", 180)
    options.setdefault("address_key", TEST_SECRET_KEY)
    return prune(session_factory, now=NOW, **options)


def add_intent(session, status: str, created_at: dt.datetime, to: str = "ada@example.com") -> int:
    """Store an intent with one attempt and one matched provider event, aged by SQL."""
    number = next(_numbers)
    intent = enqueue(
        session,
        key=f"order:{number}",
        to=to,
        template="login-code",
        params={"code": f"{number:06d}"},
    )
    session.flush()
    session.execute(
        update(Intent).where(Intent.id == intent.id).values(status=status, created_at=created_at)
    )
    attempt = Attempt(
        intent_id=intent.id,
        attempt_number=1,
        lease_token="t",
        started_at=created_at,
        outcome="accepted",
        reply_text=f"250 2.0.0 queued for {to}",
    )
    session.add(attempt)
    session.flush()
    session.add(event(f"ev-{number}", created_at, intent_id=intent.id, attempt_id=attempt.id))
    return intent.id


def event(source_event_id: str, received_at: dt.datetime, **columns) -> ProviderEvent:
    return ProviderEvent(
        source="ses",
        source_event_id=source_event_id,
        event_type="delivered",
        recipient="ada@example.com",
        received_at=received_at,
        payload={"mail": {"destination": ["ada@example.com"]}},
        **columns,
    )


def count(session, model) -> int:
    return session.execute(select(func.count()).select_from(model)).scalar_one()


def test_finished_intents_past_the_horizon_go_with_their_attempts_and_events(session_factory):
    with session_factory() as session:
        gone = [add_intent(session, status, ANCIENT) for status in
                (SUBMITTED, FAILED, DEAD, EXPIRED, SUPPRESSED, CANCELLED)]  # fmt: skip
        waiting = add_intent(session, PENDING, ANCIENT)
        kept = add_intent(session, SUBMITTED, OLD)
        session.add(event("unmatched-old", ANCIENT))
        session.add(event("unmatched-recent", RECENT))
        session.add(AuditEntry(actor="ops", action="requeue", intent_id=gone[0], created_at=OLD))
        session.commit()

    report = prune_now(session_factory)

    assert report.intents_deleted == 6 and report.events_deleted == 1
    with session_factory() as session:
        left = set(session.scalars(select(Intent.id)))
        assert left == {waiting, kept}
        assert set(session.scalars(select(Attempt.intent_id))) == {waiting, kept}
        events = session.execute(select(ProviderEvent.source_event_id, ProviderEvent.intent_id))
        assert {row.intent_id or row.source_event_id for row in events} == {
            waiting,
            kept,
            "unmatched-recent",
        }
        entry = session.scalars(select(AuditEntry)).one()
        assert (entry.actor, entry.action, entry.intent_id) == ("ops", "requeue", None)


def test_deletion_goes_in_batches_and_zero_turns_it_off(session_factory):
    with session_factory() as session:
        for _ in range(5):
            add_intent(session, SUBMITTED, ANCIENT)
        session.commit()

    off = prune_now(session_factory, delete_days=0, batch_size=2)
    assert off.intents_deleted == 0
    with session_factory() as session:
        assert count(session, Intent) == 5 and count(session, ProviderEvent) == 5

    report = prune_now(session_factory, batch_size=2)
    assert report.intents_deleted == 5
    with session_factory() as session:
        assert count(session, Intent) == count(session, Attempt) == 0
        assert count(session, ProviderEvent) == 0
    again = prune_now(session_factory, batch_size=2)
    assert (again.intents_deleted, again.events_deleted) == (0, 0)


def test_suppressions_stay_but_their_old_notes_are_cleared(session_factory):
    with session_factory() as session:
        for address, created_at in (("old@example.com", OLD), ("new@example.com", RECENT)):
            session.add(
                Suppression(
                    recipient=address,
                    reason="bounce",
                    note=f"550 5.1.1 <{address}>: user unknown",
                    created_by="smtp",
                    created_at=created_at,
                )
            )
        session.commit()

    report = prune_now(session_factory)

    assert report.suppression_notes_cleared == 1
    with session_factory() as session:
        notes = dict(session.execute(select(Suppression.recipient, Suppression.note)).all())
    assert notes["old@example.com"] is None
    assert notes["new@example.com"] == "550 5.1.1 <new@example.com>: user unknown"


def test_old_audit_entries_keep_who_what_and_when_and_name_the_address_by_its_hash(
    session_factory,
):
    with session_factory() as session:
        session.add_all(
            [
                AuditEntry(
                    actor="ops",
                    action="suppression_remove",
                    target="Ada@Example.com",
                    reason="ada@example.com asked to get mail again",
                    details={"note": "550 <ADA@example.com> user unknown"},
                    created_at=OLD,
                ),
                AuditEntry(actor="root", action="user_create", target="ops", created_at=OLD),
                AuditEntry(
                    actor="ops",
                    action="suppression_add",
                    target="bob@example.com",
                    reason="asked",
                    created_at=RECENT,
                ),  # fmt: skip
            ]
        )
        session.commit()

    report = prune_now(session_factory)

    assert report.audit_targets_hashed == 1
    token = address_hash(TEST_SECRET_KEY, "ada@example.com")
    with session_factory() as session:
        entries = {e.action: e for e in session.scalars(select(AuditEntry))}
    old = entries["suppression_remove"]
    assert (old.actor, old.target, old.created_at) == ("ops", token, OLD)
    assert old.reason == f"{token} asked to get mail again"
    assert old.details == {"note": f"550 <{token}> user unknown"}
    assert entries["user_create"].target == "ops"  # an operator account, not a recipient
    assert entries["suppression_add"].target == "bob@example.com"
    assert prune_now(session_factory).audit_targets_hashed == 0


def test_the_daily_job_and_the_prune_command_read_the_horizon(db_url, session_factory, tmp_path):
    import os
    import subprocess

    from console.config import load_settings
    from console.ops.jobs.schedule import OpsJobs
    from tests.support.commands import CONSOLE_BIN

    key = "k" * 64
    variables = {"CONSOLE_DATABASE_URL": db_url, "CONSOLE_SECRET_KEY": key}
    with session_factory() as session:
        add_intent(session, SUBMITTED, ANCIENT)
        session.add(AuditEntry(actor="ops", action="suppression_add", target="ada@example.com",
                               created_at=OLD))  # fmt: skip
        session.commit()
    settings = load_settings({}, instance_path=tmp_path, overrides=variables)
    assert settings.retention_delete_days == 180
    jobs = OpsJobs(settings)
    try:
        jobs.prune()
    finally:
        jobs.engine.dispose()
    with session_factory() as session:
        assert count(session, Intent) == 0
        assert session.scalars(select(AuditEntry.target)).one() == address_hash(
            key, "ada@example.com"
        )
        add_intent(session, SUBMITTED, dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
        session.commit()

    environment = {**os.environ, **variables, "CONSOLE_RETENTION_DELETE_DAYS": "0"}
    result = subprocess.run(
        [CONSOLE_BIN, "prune"], env=environment, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "deleted 0 intents and 0 unmatched events" in result.stdout
    environment["CONSOLE_RETENTION_DELETE_DAYS"] = "365"
    result = subprocess.run(
        [CONSOLE_BIN, "prune"], env=environment, cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "deleted 1 intent and 0 unmatched events" in result.stdout
