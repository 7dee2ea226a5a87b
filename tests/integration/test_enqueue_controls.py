"""enqueue() refuses a control character the worker would refuse in a header, before anything
is stored; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from console.mail.header_checks import check_outgoing
from console.models import Intent
from console.outbox import InvalidIntent, enqueue

LOGIN = dict(to="ada@example.com", template="login-code", params={"code": "424242"})
WELCOME = dict(to="ada@example.com", template="welcome")


def welcome(name: str) -> dict:
    return {**WELCOME, "params": {"name": name, "login_url": "https://shop.example.com/login"}}


def count_intents(session_factory) -> int:
    with session_factory() as session:
        return session.execute(select(func.count()).select_from(Intent)).scalar_one()


REFUSED = [
    ("ESC in a subject param", dict(params={"code": "42\x1b[2J"}), "subject"),
    ("BEL in a subject param", dict(params={"code": "42\x07"}), "subject"),
    ("DEL in a subject param", dict(params={"code": "42\x7f"}), "subject"),
    ("backspace in a subject param", welcome("Ada\x08\x08\x08Eve"), "subject"),
    ("encoded ESC in a subject param", dict(params={"code": "=?utf-8?q?42=1B?="}), "subject"),
    ("CR in the key", dict(key="order:1\r"), "idempotency key"),
    ("LF in the key", dict(key="order:1\nX-Injected: 1"), "idempotency key"),
    ("NUL in the key", dict(key="order:\x001"), "idempotency key"),
    ("ESC in the key", dict(key="order:\x1b1"), "idempotency key"),
    ("DEL in the key", dict(key="order:1\x7f"), "idempotency key"),
    ("NEL in the key", dict(key="order:1\x85"), "idempotency key"),
    ("line separator in the key", dict(key="order:1\u2028"), "idempotency key"),
    ("ESC in the recipient", dict(to="ada\x1b@example.com"), "recipient"),
    ("DEL in the recipient", dict(to="ada@example.com\x7f"), "recipient"),
    ("ESC in the event", dict(event="order:1\x1b"), "event"),
    ("CR in the event", dict(event="order:1\rX"), "event"),
]


@pytest.mark.parametrize("label,override,field", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_control_character_is_refused_naming_the_field(session_factory, label, override, field):
    arguments = {"key": "controls-1", **LOGIN, **override}
    with session_factory() as session:
        with pytest.raises(InvalidIntent, match=field):
            enqueue(session, **arguments)
        assert not session.new and not session.dirty
        session.flush()  # the caller's session stays usable
        enqueue(session, key="good", **LOGIN)
        session.commit()
    assert count_intents(session_factory) == 1


ACCEPTED = [
    ("tab in a subject param", dict(params={"code": "42\t43"})),
    ("unicode in a subject param", welcome("Zoë 😀 Ωmega")),
    ("tab in the key", dict(key="order:1\tconfirmation")),
    ("unicode in the key", dict(key="bestellung:ü-1")),
    ("unicode in the recipient", dict(to="zoë@example.com")),
    ("tab and unicode in the event", dict(event="commande:\t№1")),
    (
        "ESC in a param only the body shows",
        {
            **welcome("Ada"),
            "params": {"name": "Ada", "login_url": "https://shop.example.com/login\x1b"},
        },
    ),  # fmt: skip
]


@pytest.mark.parametrize("label,override", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_tabs_and_unicode_are_still_accepted(session_factory, label, override):
    arguments = {"key": "controls-ok", **LOGIN, **override}
    with session_factory() as session:
        intent = enqueue(session, **arguments)
        session.commit()
        session.expire_all()
        stored = session.get(Intent, intent.id)
        assert stored.idempotency_key == arguments["key"]
        assert stored.event == arguments.get("event")
    assert count_intents(session_factory) == 1


HEADER_CASES = [r for r in REFUSED if r[2] != "event" and "encoded" not in r[0]]


@pytest.mark.parametrize("label,override,field", HEADER_CASES, ids=[r[0] for r in HEADER_CASES])
def test_the_worker_refuses_the_same_header_values(label, override, field):
    """The worker's own check, for rows written without enqueue(), refuses each of them too."""
    params = override.get("params", {"code": "42"})
    with pytest.raises(ValueError):
        check_outgoing(
            recipient=override.get("to", "ada@example.com"),
            message_id="<a@b.example>",
            subject=" ".join(str(value) for value in params.values()),
            idempotency_key=override.get("key", "k"),
        )
