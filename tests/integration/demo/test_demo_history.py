"""`console demo`: its own database, every status, provider events, a signed webhook curl."""

from __future__ import annotations

import re
import subprocess

import pytest
from sqlalchemy import func, select

from console.demo import command, history
from console.events.webhook import compute_signature
from console.models import Intent, ProviderEvent, Suppression
from console.paths import instance_dir
from console.transports.memory import MemoryTransport
from console.vocabulary import CANCELLED, EXPIRED, SUBMITTED


def test_the_demo_has_a_database_of_its_own():
    assert command.demo_database_url(None, {}) == f"sqlite:///{instance_dir() / 'demo.db'}"
    assert command.demo_database_url(None, {"CONSOLE_DATABASE_URL": "sqlite:///x.db"}) == (
        "sqlite:///x.db"
    )
    assert command.demo_database_url("sqlite:///y.db", {"CONSOLE_DATABASE_URL": "z"}) == (
        "sqlite:///y.db"
    )
    assert "console.db" not in command.demo_database_url(None, {})


def test_the_demo_command_offers_database():
    assert "--database" in [option for param in command.demo_command.params
                            for option in param.opts]  # fmt: skip


def seed(session_factory) -> None:
    with session_factory() as session:
        command.seed_demo_events(session)
        history.seed_history(session)
        session.commit()


def count(session, *where) -> int:
    return session.execute(select(func.count()).select_from(Intent).where(*where)).scalar_one()


def test_history_gives_cancelled_and_soon_expired_mail(session_factory, make_worker, clock):
    seed(session_factory)
    with session_factory() as session:
        assert count(session, Intent.status == CANCELLED) >= 1
    make_worker(MemoryTransport()).run_once(clock())
    with session_factory() as session:
        assert count(session, Intent.status == EXPIRED) >= 1
        assert count(session, Intent.status == CANCELLED) >= 1


def test_history_seeds_provider_events_of_every_kind_once(session_factory):
    seed(session_factory)
    seed(session_factory)  # the demo runs again on the same database
    with session_factory() as session:
        events = session.execute(
            select(ProviderEvent.event_type, ProviderEvent.bounce_type, ProviderEvent.intent_id)
        ).all()
        kinds = sorted((kind, bounce, intent is not None) for kind, bounce, intent in events)
        suppressed = set(session.scalars(select(Suppression.recipient)))
        earlier = count(
            session, Intent.status == SUBMITTED, Intent.provider_message_id.is_not(None)
        )
    assert kinds.count(("delivered", None, True)) >= 2
    assert ("bounced", "permanent", True) in kinds
    assert ("complained", None, True) in kinds
    assert any(kind == "delivered" and not matched for kind, _, matched in kinds), "unmatched"
    assert len(kinds) == len(set(history.EVENT_IDS)), "the second run adds no event"
    assert {history.BOUNCED_ADDRESS, history.COMPLAINED_ADDRESS} <= suppressed
    assert earlier >= 4


def test_the_printed_curl_is_signed_with_the_demo_secret(tmp_path):
    secret = "demo-secret-for-the-test"
    snippet = history.webhook_curl("http://127.0.0.1:5000", secret, "<m-1@demo.local>",
                                   "grace@example.com")  # fmt: skip
    assert "curl" in snippet and "/webhooks/generic" in snippet
    # a stand-in curl prints what it was given, one argument a line
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "curl").write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    (fake / "curl").chmod(0o755)
    result = subprocess.run(["bash", "-c", snippet], capture_output=True, text=True, check=True,
                            env={"PATH": f"{fake}:/usr/bin:/bin"})  # fmt: skip
    arguments = result.stdout.splitlines()
    headers = dict(a.split(": ", 1) for a in arguments if re.match(r"^X-Outbox-", a))
    body = arguments[arguments.index("--data-raw") + 1]
    timestamp = headers["X-Outbox-Timestamp"]
    assert headers["X-Outbox-Signature"] == compute_signature(secret, timestamp, body.encode())
    assert '"message_id":"<m-1@demo.local>"' in body and '"type":"delivered"' in body


@pytest.fixture
def demo_app(sqlite_url):
    app = command.demo_app("smtp://127.0.0.1:2525", sqlite_url, webhook_secret="s3cret-demo")
    yield app
    from console.web.extensions import db

    with app.app_context():
        db.engine.dispose()


def test_the_demo_app_uses_the_database_it_is_given_and_a_webhook_secret(demo_app, sqlite_url):
    assert demo_app.config["SQLALCHEMY_DATABASE_URI"] == sqlite_url
    assert demo_app.extensions["console.settings"].webhook_secret == "s3cret-demo"
    unsigned = demo_app.test_client().post("/webhooks/generic", data=b"{}")
    assert unsigned.status_code == 401, "a secret is set: no 503"
