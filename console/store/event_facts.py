"""What a matched provider event does to its intent: link, facts, and the status it settles.

Works inside the caller's transaction and never commits (the store's rule).

- Facts are separate columns, each written once: ``delivered_at``, ``bounced_at`` with type and
  diagnostic (a permanent bounce replaces an earlier transient one), ``complained_at``,
  ``delayed_at`` with its reason, ``rejected_at`` with its reason. A late delivery never clears a
  complaint.
- An event that proves the provider took the message (``ACCEPTANCE_EVENTS``) moves an
  ``ambiguous`` intent to ``submitted``.
- A ``rejected`` event (the provider will never send it) moves an ``ambiguous`` or ``submitted``
  intent to ``failed``, naming the reason.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import or_, update
from sqlalchemy.orm import Session

from console.events import (
    ACCEPTANCE_EVENTS,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    PERMANENT,
    REJECTED,
)
from console.models import AuditEntry, Intent, ProviderEvent
from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED

log = logging.getLogger(__name__)


EVENT_ACTOR_PREFIX = "provider-event"
RESOLVED_ACTION = "resolved_by_provider_event"
NOT_SENT_ACTION = "not_sent_by_provider"
NOT_SENT_FROM = (AMBIGUOUS, SUBMITTED)  # the statuses a provider's "never sent" settles


def link_and_apply(
    session: Session, event_id: int, intent_id: int, attempt_id: int | None, now: dt.datetime
) -> bool:
    """Link an unmatched event to its intent and apply its fact; False if already linked."""
    linked = session.execute(
        update(ProviderEvent)
        .where(ProviderEvent.id == event_id, ProviderEvent.matched_at.is_(None))
        .values(intent_id=intent_id, attempt_id=attempt_id, matched_at=now, unmatched_reason=None)
    )
    if linked.rowcount != 1:
        return False
    event = session.get(ProviderEvent, event_id, populate_existing=True)
    intent = session.get(Intent, intent_id, populate_existing=True)
    assert event is not None and intent is not None
    _learn_provider_message_id(session, intent, event)
    _apply_fact(session, intent_id, event, now)  # matching ensured it is this recipient's
    if event.event_type in ACCEPTANCE_EVENTS:
        _settle(session, intent, event, (AMBIGUOUS,), SUBMITTED, now)
    elif event.event_type == REJECTED:
        _settle(session, intent, event, NOT_SENT_FROM, FAILED, now)
    return True


def _learn_provider_message_id(session: Session, intent: Intent, event: ProviderEvent) -> None:
    """An intent matched by Message-ID learns the provider's id for the events to come."""
    if intent.provider_message_id is None and event.provider_message_id:
        session.execute(
            update(Intent)
            .where(Intent.id == intent.id, Intent.provider_message_id.is_(None))
            .values(provider_message_id=event.provider_message_id)
        )


def _apply_fact(session: Session, intent_id: int, event: ProviderEvent, now: dt.datetime) -> None:
    """Write the event's fact to its own column, never undoing another fact."""
    happened_at = event.occurred_at or now
    if event.event_type == DELIVERED:
        condition, values = Intent.delivered_at.is_(None), {"delivered_at": happened_at}
    elif event.event_type == COMPLAINED:
        condition, values = Intent.complained_at.is_(None), {"complained_at": happened_at}
    elif event.event_type == DELAYED:
        condition = Intent.delayed_at.is_(None)
        values = {"delayed_at": happened_at, "delay_reason": event.diagnostic}
    elif event.event_type == REJECTED:
        condition = Intent.rejected_at.is_(None)
        values = {"rejected_at": happened_at, "reject_reason": event.diagnostic}
    elif event.event_type == BOUNCED:
        condition = Intent.bounced_at.is_(None)
        if event.bounce_type == PERMANENT:  # a permanent bounce outranks a transient one
            condition = or_(condition, Intent.bounce_type != PERMANENT)
        values = {
            "bounced_at": happened_at,
            "bounce_type": event.bounce_type,
            "bounce_diagnostic": event.diagnostic,
        }
    else:
        return
    session.execute(update(Intent).where(Intent.id == intent_id, condition).values(**values))


def _settle(
    session: Session,
    intent: Intent,
    event: ProviderEvent,
    from_statuses: tuple[str, ...],
    to_status: str,
    now: dt.datetime,
) -> None:
    """Move the intent from one of `from_statuses` to `to_status`, as the event proves."""
    said = f"provider event {event.id} ({event.source} {event.event_type})"
    if to_status == SUBMITTED:
        reason, action, extra = f"accepted: {said}", RESOLVED_ACTION, {"submitted_at": now}
    else:
        reason, action, extra = f"not sent: {event.diagnostic}; {said}", NOT_SENT_ACTION, {}
    before = intent.status
    settled = session.execute(
        update(Intent)
        .where(Intent.id == intent.id, Intent.status.in_(from_statuses))
        .values(status=to_status, status_reason=reason, updated_at=now, **extra)
    )
    if settled.rowcount != 1:
        return
    session.add(
        AuditEntry(
            actor=f"{EVENT_ACTOR_PREFIX}:{event.source}",
            action=action,
            intent_id=intent.id,
            reason=reason,
            before_status=before,
            after_status=to_status,
            details={"provider_event_id": event.id},
            created_at=now,
        )
    )
    log.info(
        "intent settled by a provider event",
        extra={"intent_id": intent.id, "status": to_status, "decision": action},
    )
