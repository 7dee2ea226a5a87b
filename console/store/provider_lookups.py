"""The ambiguous intents to ask the provider about, and what its answer writes.

An intent is asked about while it is ``ambiguous`` and carries no "not found" note about its last
attempt. What the provider found is recorded as its events are (``record_events``: accepted or
delivered settles it as ``submitted``, a bounce or a rejection as that event does). "Not found"
after the provider's horizon either resends the intent as it was (``reconcile``, an audited
action) or records a ``not_found`` note against it, which stays on its page and stops the asking
until the next attempt. An operator may ask about one ambiguous intent at any time; that asking
is audited. What is asked comes from ``console.store.questions``. The functions never commit.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.core.asking import Question
from console.events import ReportedEvent
from console.models import Intent
from console.store.audit import audit_values, write_audit
from console.store.provider_events import RecordSummary, record_events
from console.store.reconciliation import reconcile
from console.vocabulary import AMBIGUOUS

NOT_FOUND_EVENT = "not_found"
ACTOR = "provider-lookup"
ASKED = "ask_provider"  # the audit action of an operator's asking


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
