"""The questions the provider is asked about ambiguous intents: what each one names.

A question names the intent, its Message-ID, its recipient, when its last attempt
started and the provider message id stored for it (the last attempt's, else the
intent's), so a lookup can tell the provider's answer is about our send by any of
them. The functions only read; the caller's transaction stays open.
"""

from __future__ import annotations

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from console.core.asking import Question
from console.models import Attempt, Intent, ProviderEvent
from console.store.actions import ActionRefused, StaleAction
from console.store.provider_lookups import NOT_FOUND_EVENT
from console.vocabulary import AMBIGUOUS


def _last_started():
    """When the intent's last attempt started (a correlated subquery)."""
    return (
        select(func.max(Attempt.started_at))
        .where(Attempt.intent_id == Intent.id)
        .correlate(Intent)
        .scalar_subquery()
    )


def _stored_provider_id():
    """The provider message id of the intent's last attempt, else the intent's own."""
    last_attempts = (
        select(Attempt.provider_message_id)
        .where(Attempt.intent_id == Intent.id, Attempt.provider_message_id.is_not(None))
        .order_by(Attempt.started_at.desc(), Attempt.id.desc())
        .limit(1)
        .correlate(Intent)
        .scalar_subquery()
    )
    return func.coalesce(last_attempts, Intent.provider_message_id)


def _asked_columns(last_started):
    return (Intent.id, Intent.message_id, Intent.recipient, Intent.template, last_started)


def ambiguous_to_ask(session: Session, *, limit: int) -> list[Question]:
    """Up to `limit` ambiguous intents still to ask about, the longest-waiting first."""
    last_started = _last_started()
    noted = exists().where(
        ProviderEvent.intent_id == Intent.id,
        ProviderEvent.event_type == NOT_FOUND_EVENT,
        ProviderEvent.occurred_at >= last_started,  # about this attempt (or a later one)
    )
    rows = session.execute(
        select(*_asked_columns(last_started), _stored_provider_id())
        .where(Intent.status == AMBIGUOUS, last_started.is_not(None), ~noted)
        .order_by(last_started, Intent.id)
        .limit(limit)
    ).all()
    return [Question(*row) for row in rows]


def question_for(session: Session, intent_id: int) -> Question:
    """The question about one intent; StaleAction unless it is ambiguous now."""
    columns = (*_asked_columns(_last_started()), _stored_provider_id())
    row = session.execute(
        select(*columns, Intent.status).where(Intent.id == intent_id)
    ).one_or_none()
    if row is None:
        raise ActionRefused("intent_missing", intent_id=intent_id)
    *asked, status = row
    if status != AMBIGUOUS:
        raise StaleAction("status_moved", intent_id=intent_id, status=status, expected=AMBIGUOUS)
    if asked[4] is None:
        raise ActionRefused("no_attempt", intent_id=intent_id)
    return Question(*asked)
