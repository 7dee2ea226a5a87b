"""enqueue(): transactional, idempotent, validating — on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select

from console.models import Intent, Suppression, utcnow
from console.outbox import InvalidIntent, enqueue
from console.vocabulary import PENDING, SUPPRESSED

LOGIN = dict(to="ada@example.com", template="login-code", params={"code": "424242"})


def count_intents(session_factory) -> int:
    with session_factory() as session:
        return session.execute(select(func.count()).select_from(Intent)).scalar_one()


def test_rolled_back_transaction_leaves_no_intent(session_factory):
    with session_factory() as session:
        enqueue(session, key="login:1", **LOGIN)
        session.rollback()
    assert count_intents(session_factory) == 0


def test_committed_transaction_stores_exactly_one_intent(session_factory):
    with session_factory() as session:
        intent = enqueue(session, key="login:1", event="user:7:login", **LOGIN)
        session.commit()
    assert count_intents(session_factory) == 1
    assert intent.id is not None
    assert intent.status == PENDING
    assert intent.lane == "critical"
    assert intent.attempt_count == 0
    assert intent.template == "login-code" and intent.template_version == 1
    assert intent.message_id.startswith("<") and intent.message_id.endswith(">")
    assert "@" in intent.message_id
    assert intent.created_at.tzinfo is not None


def test_same_key_twice_returns_the_existing_intent(session_factory):
    with session_factory() as session:
        first = enqueue(session, key="order:1234:confirmation", **LOGIN)
        session.commit()
    with session_factory() as session:
        again = enqueue(session, key="order:1234:confirmation", **LOGIN)
        session.commit()
        assert again.id == first.id
        assert again.message_id == first.message_id
    assert count_intents(session_factory) == 1


def test_same_key_twice_in_one_transaction(session_factory):
    with session_factory() as session:
        first = enqueue(session, key="k", **LOGIN)
        second = enqueue(session, key="k", **LOGIN)
        session.commit()
    assert first.id == second.id
    assert count_intents(session_factory) == 1


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_same_key_from_two_concurrent_transactions(session_factory):
    """The second transaction waits for the first, then gets its row, no exception."""
    first_inserted = threading.Event()
    results: dict[str, object] = {}

    def second_caller():
        with session_factory() as session:
            first_inserted.wait(5)
            results["second"] = enqueue(session, key="race", **LOGIN).id
            session.commit()

    thread = threading.Thread(target=second_caller)
    thread.start()
    with session_factory() as session:
        results["first"] = enqueue(session, key="race", **LOGIN).id
        first_inserted.set()
        thread.join(0.5)
        assert thread.is_alive(), "the second caller must wait for the first transaction"
        session.commit()
    thread.join(10)
    assert results["first"] == results["second"]
    assert count_intents(session_factory) == 1


def test_suppressed_recipient_is_stored_as_suppressed(session_factory):
    with session_factory() as session:
        session.add(
            Suppression(recipient="ada@example.com", reason="complaint", created_at=utcnow())
        )
        session.commit()
    with session_factory() as session:
        intent = enqueue(session, key="k", **{**LOGIN, "to": "Ada@Example.com"})
        session.commit()
    assert intent.status == SUPPRESSED
    assert "suppression" in intent.status_reason


def test_explicit_version_lane_and_expiry(session_factory):
    expires = dt.datetime(2999, 1, 1)  # naive: read as UTC
    with session_factory() as session:
        intent = enqueue(
            session,
            key="k",
            to="bob@example.com",
            template="welcome@1",
            params={"name": "Bob", "login_url": "https://example.com"},
            lane="critical",
            expires_at=expires,
        )
        session.commit()
        session.expire_all()
        stored = session.get(Intent, intent.id)
    assert stored.lane == "critical"
    assert stored.expires_at == expires.replace(tzinfo=dt.UTC)


def test_recipient_account_is_stored(session_factory):
    with session_factory() as session:
        named = enqueue(session, key="k1", recipient_account="reviewer:29", **LOGIN)
        unnamed = enqueue(session, key="k2", **LOGIN)
        session.commit()
        session.expire_all()
        assert session.get(Intent, named.id).recipient_account == "reviewer:29"
        assert session.get(Intent, unnamed.id).recipient_account is None


BAD_INPUTS = [
    ("invalid address", dict(to="not-an-address")),
    ("CR/LF in address", dict(to="ada@example.com\r\nBcc: eve@example.com")),
    ("LF in subject param", dict(params={"code": "1\nBcc: eve@example.com"})),
    ("CR in subject param", dict(params={"code": "1\rX"})),
    ("encoded newline %0A", dict(params={"code": "1%0ABcc: eve@example.com"})),
    ("encoded newline RFC 2047", dict(params={"code": "=?utf-8?q?a=0Ab?="})),
    ("unicode line separator", dict(params={"code": "1\u2028x"})),
    ("unknown template", dict(template="no-such-template")),
    ("unknown version", dict(template="login-code@99")),
    ("bad template spec", dict(template="login-code@x")),
    ("missing template variable", dict(params={})),
    ("params not JSON", dict(params={"code": object()})),
    ("params not a dict", dict(params=["code"])),
    ("params NaN", dict(params={"code": float("nan")})),
    ("params too large", dict(params={"code": "1", "blob": "x" * 70_000})),
    ("unknown lane", dict(lane="express")),
    ("empty key", dict(key="")),
    ("blank key", dict(key="   ")),
    ("long key", dict(key="k" * 256)),
    ("expiry in the past", dict(expires_at=utcnow() - dt.timedelta(seconds=1))),
    ("recipient account not a string", dict(recipient_account=29)),
    ("long recipient account", dict(recipient_account="r" * 256)),
]


@pytest.mark.parametrize("label,override", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_and_stores_nothing(session_factory, label, override):
    arguments = {"key": "bad-input", **LOGIN, **override}
    with session_factory() as session:
        with pytest.raises(InvalidIntent) as raised:
            enqueue(session, **arguments)
        assert str(raised.value), "the error explains itself"
        # the caller's session stays usable
        enqueue(session, key="good", **LOGIN)
        session.commit()
    assert count_intents(session_factory) == 1


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_enqueue_notifies_other_processes_only_on_commit(db_url, session_factory):
    import psycopg

    from console.store.intents import NOTIFY_CHANNEL

    dsn = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")

        def notifications() -> int:
            return len(list(listener.notifies(timeout=0.3, stop_after=1)))

        with session_factory() as session:
            enqueue(session, key="rolled-back", **LOGIN)
            session.rollback()
        assert notifications() == 0
        with session_factory() as session:
            enqueue(session, key="committed", **LOGIN)
            assert notifications() == 0, "nothing is announced before the commit"
            session.commit()
        assert notifications() == 1
        with session_factory() as session:
            enqueue(session, key="committed", **LOGIN)  # the key is taken: nothing new
            session.commit()
        assert notifications() == 0


def test_without_configure_the_first_enqueue_reads_the_settings(session_factory, monkeypatch):
    """An application that never calls configure(): CONSOLE_* read once, through config.py."""
    from console import outbox
    from console.config import ConfigError
    from console.mail import catalog as mail_catalog

    monkeypatch.setattr(mail_catalog, "_configured", mail_catalog._configured)
    monkeypatch.setattr(outbox, "_options", None)
    monkeypatch.setenv("CONSOLE_MESSAGE_ID_DOMAIN", "mail.shop.example")
    monkeypatch.setenv("CONSOLE_MAX_PARAMS_BYTES", "64")
    with session_factory() as session:
        intent = enqueue(session, key="login:1", **LOGIN)
        session.commit()
        assert intent.message_id.endswith("@mail.shop.example>")
        with pytest.raises(InvalidIntent, match="above the 64 limit"):
            enqueue(session, key="login:2", **{**LOGIN, "params": {"code": "4" * 80}})

    monkeypatch.setattr(outbox, "_options", None)
    monkeypatch.setenv("CONSOLE_MAX_PARAMS_BYTES", "lots")
    with session_factory() as session, pytest.raises(ConfigError, match="CONSOLE_MAX_PARAMS_BYTES"):
        enqueue(session, key="login:3", **LOGIN)
