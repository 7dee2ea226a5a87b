"""enqueue() refuses a control character in `locale` and `purpose` as in its other fields,
before anything is stored; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from console.models import Intent
from console.outbox import InvalidIntent, enqueue

LOGIN = dict(to="ada@example.com", template="login-code", params={"code": "424242"})

REFUSED = [
    ("locale", "en\r\nX: y"),
    ("locale", "en\x1b[2J"),
    ("locale", "en\x7f"),
    ("locale", "en\u2028"),
    ("purpose", "account\nX-Injected: 1"),
    ("purpose", "account\x07"),
    ("purpose", "account\x85"),
]


def count_intents(session_factory) -> int:
    with session_factory() as session:
        return session.execute(select(func.count()).select_from(Intent)).scalar_one()


@pytest.mark.parametrize("field,value", REFUSED)
def test_a_control_character_is_refused_naming_the_field(session_factory, field, value):
    with session_factory() as session:
        with pytest.raises(InvalidIntent, match=field):
            enqueue(session, key="controls-1", **LOGIN, **{field: value})
        assert not session.new and not session.dirty
        enqueue(session, key="good", **LOGIN, locale="pt-BR", purpose="account security")
        session.commit()
    assert count_intents(session_factory) == 1
