"""``console forget``: an erasure request leaves the address in no column of any table.

The intents to the address go with their attempts and events, the audit log and
the suppression list name it by its keyed hash, and the hashed suppression
still stops mail to it. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from urllib.parse import quote, quote_plus

import pytest
from sqlalchemy import select, text, update

from console.core.address_hash import address_hash
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.outbox import enqueue
from console.state_tables import IntentHold, LoginFailureCount
from console.store import erasure, suppressions
from console.store.actions import ActionRefused
from console.vocabulary import CANCELLED, FAILED, PENDING, SUBMITTED, SUPPRESSED
from tests.conftest import TEST_SECRET_KEY
from tests.support.commands import CONSOLE_BIN
from tests.support.erasure_checks import files_holding, places_holding

ADDRESS = "erin.example@mail.example.com"
TYPED = "Erin.Example@Mail.Example.COM"  # as the application and the operator typed it
TOKEN = address_hash(TEST_SECRET_KEY, ADDRESS)
NOW = utcnow()


def add_intent(session, to: str, status: str, key: str, **params) -> Intent:
    intent = enqueue(
        session, key=key, to=to, template="login-code", params={"code": "123456", **params}
    )
    session.flush()
    session.execute(update(Intent).where(Intent.id == intent.id).values(status=status))
    return intent


def store_everything_about_the_address(session_factory) -> dict[str, int]:
    """The traces an address leaves over the months, in every table that can hold it."""
    suppressions.use_address_key(TEST_SECRET_KEY)
    with session_factory() as session:
        sent = add_intent(session, TYPED, SUBMITTED, f"signup:{ADDRESS}")
        failed = add_intent(session, ADDRESS, FAILED, "reset:9")
        add_intent(session, ADDRESS.upper(), SUPPRESSED, "reset:10")
        pending = add_intent(session, TYPED, PENDING, "login:11")
        other = add_intent(session, "ada@example.com", SUBMITTED, "case:1", reviewer=TYPED)
        unrelated = add_intent(session, "bob@example.com", SUBMITTED, "case:2")
        waiting = add_intent(session, "cy@example.com", PENDING, "case:3", reviewer=ADDRESS)
        attempt = Attempt(intent_id=failed.id, attempt_number=1, lease_token="t",
                          started_at=NOW, outcome="permanent",
                          reply_text=f"550 5.1.1 <{TYPED}>: user unknown")  # fmt: skip
        session.add(attempt)
        session.flush()
        session.add_all(
            [
                ProviderEvent(source="ses", source_event_id="e1", event_type="delivered",
                              recipient=ADDRESS, intent_id=sent.id, received_at=NOW,
                              payload={"mail": {"destination": [TYPED]}}),
                ProviderEvent(source="ses", source_event_id="e2", event_type="bounced",
                              recipient=TYPED, diagnostic=f"smtp; 550 <{ADDRESS}>",
                              received_at=NOW, unmatched_reason="no attempt yet"),
                ProviderEvent(source="generic", source_event_id="e3", event_type="delivered",
                              recipient="ada@example.com", intent_id=other.id, received_at=NOW,
                              payload={"to": ["ada@example.com", ADDRESS.upper()]}),
                Suppression(recipient=ADDRESS, reason="bounce", created_by="smtp",
                            note=f"550 5.1.1 <{ADDRESS}>", source_attempt_id=attempt.id,
                            created_at=NOW),
                Suppression(recipient="ada@example.com", reason="manual", created_by="ops",
                            note=f"same person as {TYPED}", created_at=NOW),
                AuditEntry(actor="ops", action="suppression_add", target=ADDRESS,
                           reason="bounced", created_at=NOW),
                AuditEntry(actor="ops", action="requeue", intent_id=failed.id, target=TYPED,
                           reason=f"{ADDRESS.upper()} says the mailbox works now",
                           before_status=FAILED, after_status=PENDING,
                           details={"note": f"asked by {ADDRESS}"}, created_at=NOW),
            ]
        )  # fmt: skip
        session.commit()
    return dict(pending=pending.id, other=other.id, unrelated=unrelated.id, waiting=waiting.id)


def store_the_address_in_other_forms(session_factory) -> None:
    """The address URL-encoded, JSON-escaped and typed at the login form, where others wrote it."""
    encoded, plus = quote(TYPED, safe=""), quote_plus(TYPED)
    with session_factory() as session:
        add_intent(session, "dora@example.com", SUBMITTED, "case:4",
                   unsubscribe=f"https://shop.example/u?email={encoded.lower()}")  # fmt: skip
        session.add_all(
            [
                AuditEntry(actor="ops", action="export", target=f"csv of q={encoded}",
                           details={"query": f"q={plus}&status=failed"}, created_at=NOW),
                AuditEntry(actor="ops", action="search", target="json of q=bounced",
                           reason=f"asked by {TYPED.replace('@', '%40')}", created_at=NOW),
                IntentHold(kind="domain", value="mail.example.com", held_by="ops", held_at=NOW,
                           reason=f"{TYPED} says their mailbox forwards to a spam trap"),
                LoginFailureCount(username=ADDRESS, address="203.0.113.9", failures=3,
                                  first_failure_at=NOW, last_failure_at=NOW),
                LoginFailureCount(username="", address="203.0.113.9", failures=3,
                                  first_failure_at=NOW, last_failure_at=NOW),
            ]
        )  # fmt: skip
        session.commit()
        escaped = json.dumps({"note": f"forwarded by {TYPED}"}).replace("@", "\\u0040")
        session.execute(
            text("UPDATE audit_entry SET details = :details WHERE action = 'search'"),
            {"details": escaped},
        )
        session.commit()


def test_an_erasure_leaves_the_address_in_no_column_of_any_table(engine, session_factory):
    ids = store_everything_about_the_address(session_factory)
    assert len(places_holding(engine, ADDRESS)) >= 8

    with session_factory() as session:
        plan = erasure.preview(session, TYPED, secret_key=TEST_SECRET_KEY)
        assert (plan.address, plan.token, plan.finished_intents) == (ADDRESS, TOKEN, 3)
        assert plan.unfinished == [(ids["pending"], PENDING)]
        assert (plan.events, plan.audit_entries, plan.suppressed) == (3, 2, True)
        assert (plan.params_elsewhere, plan.unsent_elsewhere) == (1, [ids["waiting"]])
        report = erasure.forget(session, TYPED, actor="dpo", reason=f"request from {TYPED}",
                                secret_key=TEST_SECRET_KEY, cancel=True)  # fmt: skip
        session.commit()

    assert (report.intents_deleted, report.cancelled, report.events_deleted) == (4, 1, 3)
    assert report.suppression_kept and report.params_scrubbed == 1
    assert places_holding(engine, ADDRESS) == ["email_intent.params"]  # the unsent one, named
    with session_factory() as session:
        left = set(session.scalars(select(Intent.id)))
        assert left == {ids["other"], ids["unrelated"], ids["waiting"]}
        assert session.get(Intent, ids["other"]).params is None
        assert session.get(Intent, ids["unrelated"]).params == {"code": "123456"}
        suppressed = dict(session.execute(select(Suppression.recipient, Suppression.note)).all())
        assert suppressed == {TOKEN: None, "ada@example.com": f"same person as {TOKEN}"}
        entries = {e.action: e for e in session.scalars(select(AuditEntry))}
        assert entries["requeue"].reason == f"{TOKEN} says the mailbox works now"
        assert entries["requeue"].details == {"note": f"asked by {TOKEN}"}
        assert entries["requeue"].actor == "ops" and entries["requeue"].intent_id is None
        assert entries["suppression_add"].target == TOKEN
        audit = entries["forget"]
        assert (audit.actor, audit.target, audit.reason) == ("dpo", TOKEN, f"request from {TOKEN}")
        assert audit.details["intents_deleted"] == 4
        # the forgotten address stays suppressed: new mail to it is never sent
        again = enqueue(session, key="login:12", to=ADDRESS, template="login-code",
                        params={"code": "1"})  # fmt: skip
        assert again.status == SUPPRESSED


def test_an_erasure_finds_every_written_form_and_leaves_no_byte_behind(engine, session_factory):
    ids = store_everything_about_the_address(session_factory)
    store_the_address_in_other_forms(session_factory)
    with session_factory() as session:  # the unsent mail quoting it is sent meanwhile
        session.execute(update(Intent).where(Intent.id == ids["waiting"]).values(status=SUBMITTED))
        session.commit()
    assert {"audit_entry.target", "intent_hold.reason",
            "login_failure_count.username"} <= set(places_holding(engine, ADDRESS))  # fmt: skip

    with session_factory() as session:
        report = erasure.forget(session, TYPED, actor="dpo", reason=f"request from {TYPED}",
                                secret_key=TEST_SECRET_KEY, cancel=True)  # fmt: skip
        session.commit()

    assert report.params_scrubbed == 3 and report.audit_entries == 4
    assert places_holding(engine, ADDRESS) == []
    if engine.dialect.name == "sqlite":
        assert files_holding(engine, ADDRESS) == [], "not even in free pages or the WAL"
    with session_factory() as session:
        targets = set(session.scalars(select(AuditEntry.target)))
        assert f"csv of q={TOKEN}" in targets and "json of q=bounced" in targets
        hold = session.scalars(select(IntentHold)).one()
        assert hold.reason == f"{TOKEN} says their mailbox forwards to a spam trap"
        throttled = session.execute(select(LoginFailureCount.username)).scalars().all()
        assert throttled == [""], "the client address's own count stays"


def test_a_non_ascii_address_is_found_where_json_escapes_it(engine, session_factory):
    address = "zoë.erase@example.org"
    with session_factory() as session:
        add_intent(session, "ada@example.com", SUBMITTED, "case:5", reviewer=address)
        session.add(AuditEntry(actor="ops", action="note", target="case 5", created_at=NOW,
                               details={"reviewer": "Zoë.Erase@Example.ORG"}))  # fmt: skip
        session.commit()
    assert places_holding(engine, address) == ["audit_entry.details", "email_intent.params"]

    with session_factory() as session:
        report = erasure.forget(session, address, actor="dpo", reason="request 8",
                                secret_key=TEST_SECRET_KEY)  # fmt: skip
        session.commit()

    assert (report.params_scrubbed, report.audit_entries) == (1, 1)
    assert places_holding(engine, address) == []


def test_unfinished_mail_refuses_the_erasure_and_changes_nothing(engine, session_factory):
    ids = store_everything_about_the_address(session_factory)
    before = places_holding(engine, ADDRESS)
    with session_factory() as session:
        with pytest.raises(ActionRefused, match=rf"{ids['pending']} \(pending\)"):
            erasure.forget(session, ADDRESS, actor="dpo", reason="request 7",
                           secret_key=TEST_SECRET_KEY)  # fmt: skip
        session.rollback()
        with pytest.raises(ActionRefused, match="reason"):
            erasure.forget(session, ADDRESS, actor="dpo", reason=" ",
                           secret_key=TEST_SECRET_KEY, cancel=True)  # fmt: skip
        with pytest.raises(ActionRefused, match="invalid address"):
            erasure.preview(session, "not an address", secret_key=TEST_SECRET_KEY)
    assert places_holding(engine, ADDRESS) == before
    with session_factory() as session:
        assert session.get(Intent, ids["pending"]).status == PENDING


def test_an_intent_requeued_during_the_erasure_undoes_it(session_factory, monkeypatch):
    store_everything_about_the_address(session_factory)
    real_preview = erasure.preview

    def preview_then_requeue(session, address, **options):
        plan = real_preview(session, address, **options)
        session.execute(
            update(Intent)
            .where(Intent.recipient == ADDRESS, Intent.status == FAILED)
            .values(status=PENDING, updated_at=NOW + dt.timedelta(seconds=1))
        )
        return plan

    monkeypatch.setattr(erasure, "preview", preview_then_requeue)
    with session_factory() as session:
        with pytest.raises(ActionRefused, match="changed meanwhile"):
            erasure.forget(session, ADDRESS, actor="dpo", reason="request 7",
                           secret_key=TEST_SECRET_KEY, cancel=True)  # fmt: skip
        session.rollback()
        statuses = session.scalars(select(Intent.status).where(Intent.recipient == ADDRESS))
        assert statuses.all() == [FAILED]  # the requeue was rolled back with the erasure
        assert len(places_holding(session.get_bind(), ADDRESS)) >= 8


def test_the_forget_command_refuses_then_cancels_and_prints_only_the_hash(
    db_url, engine, session_factory, tmp_path
):
    ids = store_everything_about_the_address(session_factory)
    environment = {**os.environ, "CONSOLE_DATABASE_URL": db_url,
                   "CONSOLE_SECRET_KEY": TEST_SECRET_KEY}  # fmt: skip

    def forget(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [CONSOLE_BIN, "forget", TYPED, "--reason", "ticket 4711", *options],
            env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    refused = forget()
    assert refused.returncode == 1
    assert f"{ids['pending']} (pending)" in refused.stderr and "--cancel" in refused.stderr
    with session_factory() as session:
        assert session.get(Intent, ids["pending"]).status == PENDING

    done = forget("--cancel")
    assert done.returncode == 0, done.stderr
    assert f"forgot {TOKEN}: deleted 4 intents (1 cancelled first)" in done.stdout
    assert f"suppression kept as {TOKEN}" in done.stdout
    assert ADDRESS not in (done.stdout + done.stderr).lower()
    assert places_holding(engine, ADDRESS) == ["email_intent.params"]
    with session_factory() as session:
        entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "forget")).one()
        assert entry.actor.startswith("cli:") and entry.reason == "ticket 4711"
        assert session.get(Intent, ids["pending"]) is None
        assert CANCELLED not in session.scalars(select(Intent.status)).all()
