"""The ambiguous intents to ask the provider about, and what its answer writes.

An intent is asked about while it is ``ambiguous`` and carries no "not found"
note about its last attempt. What the provider found is recorded
as its events are (``record_events``: accepted or delivered settles it as
``submitted``, a bounce or a rejection as that event does). "Not found" after
the provider's horizon either resends the intent as it was (``reconcile``, an
audited action) or records a ``not_found`` note against it, which stays on its
page and stops the asking until the next attempt. The functions never commit.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from console.core.asking import Question
from console.events import ReportedEvent
from console.models import Attempt, Intent, ProviderEvent
from console.store.events import RecordSummary, record_events
from console.store.reconciliation import reconcile
from console.vocabulary import AMBIGUOUS

NOT_FOUND_EVENT = "not_found"
ACTOR = "provider-lookup"


def ambiguous_to_ask(session: Session, *, limit: int) -> list[Question]:
    """Up to `limit` ambiguous intents still to ask about, the longest-waiting first."""
    last_started = (
        select(func.max(Attempt.started_at))
        .where(Attempt.intent_id == Intent.id)
        .correlate(Intent)
        .scalar_subquery()
    )
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
    session: Session, question: Question, reason: str, now: dt.datetime | None = None
) -> None:
    """Send the intent again as it was (same Message-ID and key), audited."""
    reconcile(session, question.intent_id, resolution="resend", actor=ACTOR, reason=reason, now=now)
