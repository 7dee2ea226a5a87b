"""The question about an ambiguous intent carries the provider id we stored for it: the last
attempt's, else the intent's, so a lookup can recognise our send by it."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from sqlalchemy import update

from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.store import questions
from console.vocabulary import AMBIGUOUS

WELCOME = {"name": "Bob", "login_url": "https://shop.example.com/login"}
_keys = itertools.count(1)


def ambiguous(session, attempt_ids: list[str | None], intent_id_stored: str | None = None) -> int:
    """An ambiguous intent with one attempt per id in `attempt_ids`, oldest first."""
    intent = enqueue(
        session, key=f"welcome:{next(_keys)}", to="ada@example.com", template="welcome",
        params=WELCOME,
    )  # fmt: skip
    session.flush()
    started = utcnow() - dt.timedelta(hours=1)
    for number, provider_id in enumerate(attempt_ids, start=1):
        session.add(
            Attempt(
                intent_id=intent.id, attempt_number=number, lease_token=f"t{number}",
                started_at=started + dt.timedelta(minutes=number),
                provider_message_id=provider_id,
            )
        )  # fmt: skip
    values = dict(status=AMBIGUOUS, provider_message_id=intent_id_stored)
    session.execute(update(Intent).where(Intent.id == intent.id).values(**values))
    session.commit()
    return intent.id


@pytest.mark.parametrize(
    ("attempt_ids", "on_intent", "expected"),
    [
        (["first-id", "last-id"], None, "last-id"),
        (["first-id", None], None, "first-id"),
        ([None], "intent-id", "intent-id"),
        (["attempt-id"], "intent-id", "attempt-id"),
        ([None, None], None, None),
    ],
)
def test_the_question_names_the_stored_provider_id(
    session_factory, attempt_ids, on_intent, expected
):
    with session_factory() as session:
        intent_id = ambiguous(session, attempt_ids, on_intent)
    with session_factory() as session:
        [batched] = questions.ambiguous_to_ask(session, limit=20)
        one = questions.question_for(session, intent_id)
    assert batched == one
    assert (one.intent_id, one.provider_message_id) == (intent_id, expected)
    assert one.attempted_at is not None and one.recipient == "ada@example.com"
