"""A requeue of a capped intent that gives it N more attempts: the store, the worker, the page.

``requeue(..., more_attempts=N)`` sets ``attempts_granted`` to the attempts made
plus N and audits N; the worker then retries it N more times before it is dead
again, even past the attempt cap and the age cap. A bad N is refused and
nothing changes.
"""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import func, select

from console.core.backoff import Backoff
from console.core.send_result import SendResult
from console.models import Attempt, AuditEntry, Intent, utcnow
from console.store import intent_actions
from console.store.actions import ActionRefused
from console.transports.memory import MemoryTransport
from console.vocabulary import ENVELOPE
from console.web.extensions import db

RECIPIENT = "ada@example.com"
DEFERRED = SendResult(ENVELOPE, code=451, reply_text="4.3.0 try again later")
CAP = 8  # CONSOLE_MAX_ATTEMPTS of the console the tests run


def state(app, intent_id: int):
    with app.app_context():
        return db.session.execute(
            select(Intent.status, Intent.attempt_count, Intent.attempts_granted).where(
                Intent.id == intent_id
            )
        ).one()


def audit_of(app, intent_id: int) -> list[tuple[str, dict | None]]:
    with app.app_context():
        rows = db.session.execute(
            select(AuditEntry.action, AuditEntry.details)
            .where(AuditEntry.intent_id == intent_id)
            .order_by(AuditEntry.id)
        )
        return [(row.action, row.details) for row in rows]


def requeue(app, intent_id: int, **options):
    with app.app_context():
        result = intent_actions.requeue(
            db.session, intent_id, actor="olga", reason="relay fixed", attempt_cap=CAP, **options
        )
        db.session.commit()
        return result


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_requeue_with_more_attempts_grants_them_and_audits_n(app, add_intent):
    dead = add_intent("dead", attempt_count=8, status_reason="gave up after 8 attempts")

    result = requeue(app, dead, more_attempts=3)

    assert result.after_status == "pending"
    assert tuple(state(app, dead)) == ("pending", 8, 11)
    [(action, details)] = audit_of(app, dead)
    assert action == "requeue"
    assert details["more_attempts"] == 3


def test_a_plain_requeue_grants_nothing(app, add_intent):
    dead = add_intent("dead", attempt_count=8)
    requeue(app, dead)
    assert tuple(state(app, dead)) == ("pending", 8, None)


@pytest.mark.parametrize("more_attempts", [0, -1, CAP + 1])
def test_a_bad_number_of_more_attempts_is_refused_and_changes_nothing(
    app, add_intent, more_attempts
):
    dead = add_intent("dead", attempt_count=8)
    with pytest.raises(ActionRefused, match=f"from 1 to {CAP}"):
        requeue(app, dead, more_attempts=more_attempts)
    assert tuple(state(app, dead)) == ("dead", 8, None)
    assert audit_of(app, dead) == []


@pytest.mark.parametrize("text", ["", "three", "2.5", "99999999999999999999"])
def test_more_attempts_from_a_form_is_a_whole_number_in_range(text):
    with pytest.raises(ActionRefused, match=f"from 1 to {CAP}"):
        intent_actions.more_attempts_from(text, CAP)


def test_more_attempts_from_a_form():
    assert intent_actions.more_attempts_from(None, CAP) is None
    assert intent_actions.more_attempts_from(" 3 ", CAP) == 3


def attempts_of(app, intent_id: int) -> int:
    with app.app_context():
        query = select(func.count()).select_from(Attempt).where(Attempt.intent_id == intent_id)
        return db.session.execute(query).scalar_one()


def drain(worker, clock, app, intent_id: int, ticks: int = 12) -> None:
    """Tick the worker, moving the clock past each back-off, until the intent is dead."""
    for _ in range(ticks):
        worker.run_once()
        if state(app, intent_id).status == "dead":
            return
        clock.advance(30)
    raise AssertionError(f"intent {intent_id} still {state(app, intent_id).status}")


def test_the_worker_makes_exactly_n_more_attempts_after_such_a_requeue(
    app, add_intent, make_worker, clock
):
    intent_id = add_intent("pending")
    worker = make_worker(
        MemoryTransport({RECIPIENT: [DEFERRED]}), max_attempts=3, backoff=Backoff(10, 20, 5)
    )
    drain(worker, clock, app, intent_id)
    assert tuple(state(app, intent_id)) == ("dead", 3, None), "dead of the attempt cap"

    requeue(app, intent_id, more_attempts=3, now=clock())
    drain(worker, clock, app, intent_id)

    assert tuple(state(app, intent_id)) == ("dead", 6, 6)
    assert attempts_of(app, intent_id) == 6
    for _ in range(3):
        clock.advance(60)
        worker.run_once()
    assert attempts_of(app, intent_id) == 6, "no attempt after the granted ones"


def test_granted_attempts_outlive_the_age_cap(app, add_intent, make_worker, clock):
    intent_id = add_intent("pending")
    worker = make_worker(
        MemoryTransport({RECIPIENT: [DEFERRED]}),
        max_attempts=8,
        max_age_seconds=20,
        backoff=Backoff(10, 20, 5),
    )
    clock.advance(30)
    drain(worker, clock, app, intent_id)
    assert tuple(state(app, intent_id))[:2] == ("dead", 1), "dead of the age cap"

    requeue(app, intent_id, more_attempts=2, now=clock())
    drain(worker, clock, app, intent_id)

    assert tuple(state(app, intent_id)) == ("dead", 3, 3)


def test_the_form_of_a_capped_intent_gives_n_more_attempts(app, console_client, add_intent):
    dead = add_intent("dead", attempt_count=8, status_reason="gave up after 8 attempts")
    client = console_client("operator")
    page = client.get(f"/intents/{dead}").text
    assert re.search(r'<input[^>]*name="more_attempts"[^>]*value="3"', page)
    assert "give it" in text_of(page)

    form = {"reason": "relay fixed", "expected_status": "dead", "more_attempts": "3",
            "csrf_token": client.csrf_token}  # fmt: skip
    response = client.post(f"/intents/{dead}/requeue", data=form)
    assert response.status_code == 303
    after = text_of(client.get(response.headers["Location"]).text)
    assert "3 more attempts" in after
    assert "3 attempts remain" in after
    assert "attempt 9 of 11" in after
    assert tuple(state(app, dead)) == ("pending", 8, 11)


def test_the_form_refuses_a_bad_number_and_changes_nothing(app, console_client, add_intent):
    dead = add_intent("dead", attempt_count=8)
    client = console_client("operator")
    form = {"reason": "relay fixed", "expected_status": "dead", "more_attempts": "50",
            "csrf_token": client.csrf_token}  # fmt: skip
    response = client.post(f"/intents/{dead}/requeue", data=form)
    assert response.status_code == 303
    page = text_of(client.get(response.headers["Location"]).text)
    assert "from 1 to 8" in page
    assert tuple(state(app, dead)) == ("dead", 8, None)


def test_the_form_of_an_intent_with_attempts_left_has_no_number(console_client, add_intent):
    failed = add_intent("failed", attempt_count=3)
    page = console_client("operator").get(f"/intents/{failed}").text
    assert 'name="more_attempts"' not in page


def test_next_step_counts_down_the_granted_attempts(app, console_client, add_intent):
    pending = add_intent("pending", attempt_count=10, attempts_granted=11, next_attempt_at=utcnow())
    page = text_of(console_client("viewer").get(f"/intents/{pending}").text)
    assert "attempt 11 of 11" in page
    assert "1 attempt remains" in page
    assert "the last one" in page
