"""The ambiguous intents to ask the provider about, and what its answer writes.

An intent is asked about while it is ``ambiguous`` and carries no "not found"
note about its last attempt. What the provider found is recorded
as its events are (``record_events``: accepted or delivered settles it as
``submitted``, a bounce or a rejection as that event does). "Not found" after
the provider's horizon either resends the intent as it was (``reconcile``, an
audited action) or records a ``not_found`` note against it, which stays on its
page and stops the asking until the next attempt. An operator may ask about one
ambiguous intent at any time (``question_for``); that asking is audited. The
functions never commit.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from console.core.asking import Question
from console.events import ReportedEvent
from console.models import Attempt, Intent, ProviderEvent
from console.store.actions import ActionRefused, StaleAction
from console.store.audit import audit_values, write_audit
from console.store.events import RecordSummary, record_events
from console.store.reconciliation import reconcile
from console.vocabulary import AMBIGUOUS

NOT_FOUND_EVENT = "not_found"
ACTOR = "provider-lookup"
ASKED = "ask_provider"  # the audit action of an operator's asking


def _last_started():
    """When the intent's last attempt started (a correlated subquery)."""
    return (
        select(func.max(Attempt.started_at))
        .where(Attempt.intent_id == Intent.id)
        .correlate(Intent)
        .scalar_subquery()
    )


def ambiguous_to_ask(session: Session, *, limit: int) -> list[Question]:
    """Up to `limit` ambiguous intents still to ask about, the longest-waiting first."""
    last_started = _last_started()
    noted = exists().where(
        ProviderEvent.intent_id == Intent.id,
        ProviderEvent.event_type == NOT_FOUND_EVENT,
        ProviderEvent.occurred_at >= last_started,  # about this attempt (or a later one)
    )
    rows = session.execute(
        select(Intent.id, Intent.message_id, Intent.recipient, Intent.template, last_started)
        .where(Intent.status == AMBIGUOUS, last_started.is_not(None), ~noted)
        .order_by(last_started, Intent.id)
        .limit(limit)
    ).all()
    return [Question(*row) for row in rows]


def question_for(session: Session, intent_id: int) -> Question:
    """The question about one intent; StaleAction unless it is ambiguous now."""
    columns = (Intent.id, Intent.message_id, Intent.recipient, Intent.template, _last_started())
    row = session.execute(
        select(*columns, Intent.status).where(Intent.id == intent_id)
    ).one_or_none()
    if row is None:
        raise ActionRefused(f"intent {intent_id} does not exist")
    *asked, status = row
    if status != AMBIGUOUS:
        raise StaleAction(
            f"intent {intent_id} is now {status}, no longer ambiguous: nothing was done"
        )
    if asked[-1] is None:
        raise ActionRefused(f"intent {intent_id} has no attempt to ask about")
    return Question(*asked)


def audit_asking(
    session: Session, question: Question, *, actor: str, details: dict, now: dt.datetime
) -> None:
    """Audit that `actor` asked the provider about the intent, and what it answered."""
    status = session.execute(select(Intent.status).where(Intent.id == question.intent_id)).scalar()
    entry = audit_values(
        actor=actor,
        action=ASKED,
        now=now,
        intent_id=question.intent_id,
        target=question.recipient,
        before=AMBIGUOUS,
        after=status,
        details=details,
    )
    write_audit(session, [entry])


def record_found(session: Session, events: tuple[ReportedEvent, ...]) -> RecordSummary:
    """Record what the provider found, as its events would be."""
    return record_events(session, list(events))


def note_not_found(session: Session, question: Question, source: str, detail: str) -> bool:
    """Record on the intent that the provider has no record of its last attempt."""
    note = ReportedEvent(
        source=source,
        source_event_id=f"lookup-none:{question.intent_id}:{question.attempted_at.isoformat()}",
        event_type=NOT_FOUND_EVENT,
        recipient=question.recipient,
        diagnostic=detail,
        message_id=question.message_id,
        occurred_at=question.attempted_at,  # the attempt it is about
    )
    return record_events(session, [note]).matched == 1


def resend_not_found(
    session: Session,
    question: Question,
    reason: str,
    now: dt.datetime | None = None,
    actor: str = ACTOR,
) -> None:
    """Send the intent again as it was (same Message-ID and key), audited."""
    reconcile(session, question.intent_id, resolution="resend", actor=actor, reason=reason, now=now)
