"""Recording provider events: deduplicate, correlate, apply facts, suppress.

Every function works inside the caller's transaction and never commits, so a
webhook acknowledges only once the whole effect of its events is durable.

- An event is inserted with UNIQUE(source, source_event_id): a redelivery
  inserts nothing and changes nothing.
- It is matched to its intent by the rule of ``console.events.matching``: its
  Message-ID when present, else its provider message id (on the intent or on
  one of its attempts), together with the recipient it names — provider ids
  repeat, so an event is never attached to another recipient's intent. One
  that matches no intent, or several, stays unmatched (``intent_id`` and
  ``matched_at`` NULL, the reason in ``unmatched_reason``) until
  ``match_unmatched_events`` finds exactly one by the same rule.
- Facts are separate columns, each written once: ``delivered_at``,
  ``bounced_at`` with type and diagnostic (a permanent bounce replaces an
  earlier transient one), ``complained_at``. A late delivery never clears a
  complaint.
- A permanent bounce or a complaint puts the recipient on the suppression list,
  naming the event; a transient or undetermined bounce does not.
- A delivery, bounce or complaint proves the provider accepted the message, so
  an ``ambiguous`` intent becomes ``submitted``.

The queries of the console's event pages are in ``console.store.event_pages``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from sqlalchemy import Select, func, or_, select, union, update
from sqlalchemy.orm import Session

from console.events import (
    ACCEPTANCE_EVENTS,
    BOUNCED,
    COMPLAINED,
    DELIVERED,
    PERMANENT,
    ReportedEvent,
)
from console.events.matching import Candidate, choose
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.vocabulary import AMBIGUOUS, SUBMITTED

log = logging.getLogger(__name__)

MATCH_BATCH_SIZE = 500
CANDIDATES_LOOKED_AT = 50  # intents sharing one provider id: enough to tell or to say why
EVENT_ACTOR_PREFIX = "provider-event"
RESOLVED_ACTION = "resolved_by_provider_event"


@dataclasses.dataclass
class RecordSummary:
    """What recording a batch of reported events did."""

    inserted: int = 0
    duplicates: int = 0
    matched: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def _dialect_insert(session: Session):
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def record_events(
    session: Session, events: list[ReportedEvent], *, now: dt.datetime | None = None
) -> RecordSummary:
    """Store each event once, suppress, and match what can be matched now."""
    now = now or utcnow()
    summary = RecordSummary()
    for event in events:
        row_id = _insert_once(session, event, now)
        if row_id is None:
            summary.duplicates += 1
            continue
        summary.inserted += 1
        if event.suppresses_recipient:
            _suppress(session, event, row_id, now)
        summary.matched += _match_new_event(session, row_id, event, now)
    return summary


def _insert_once(session: Session, event: ReportedEvent, now: dt.datetime) -> int | None:
    """INSERT ... ON CONFLICT DO NOTHING; the new row's id, or None for a redelivery."""
    insert = _dialect_insert(session)
    statement = (
        insert(ProviderEvent)
        .values(
            source=event.source,
            source_event_id=event.source_event_id,
            event_type=event.event_type,
            bounce_type=event.bounce_type,
            recipient=event.recipient[:320] if event.recipient else None,
            diagnostic=event.diagnostic,
            provider_message_id=_clip(event.provider_message_id),
            message_id=_clip(event.message_id),
            occurred_at=event.occurred_at,
            received_at=now,
            payload=event.payload,
        )
        .on_conflict_do_nothing(index_elements=["source", "source_event_id"])
        .returning(ProviderEvent.id)
    )
    return session.execute(statement).scalar_one_or_none()


def _clip(value: str | None, limit: int = 255) -> str | None:
    return value[:limit] if value else None


def _suppress(session: Session, event: ReportedEvent, event_row_id: int, now: dt.datetime) -> None:
    """Upsert the recipient's suppression; a complaint outranks an earlier bounce."""
    assert event.recipient is not None
    recipient = event.recipient.lower()[:320]
    reason = "complaint" if event.event_type == COMPLAINED else "bounce"
    insert = _dialect_insert(session)
    session.execute(
        insert(Suppression)
        .values(
            recipient=recipient,
            reason=reason,
            note=event.diagnostic,
            source_event_id=event_row_id,
            created_by=f"{EVENT_ACTOR_PREFIX}:{event.source}",
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=["recipient"])
    )
    if reason == "complaint":
        session.execute(
            update(Suppression)
            .where(Suppression.recipient == recipient, Suppression.reason == "bounce")
            .values(reason="complaint", source_event_id=event_row_id, note=event.diagnostic)
        )


def _match_new_event(session: Session, row_id: int, event: ReportedEvent, now: dt.datetime) -> int:
    chosen = _choose_intent(
        session,
        provider_message_id=_clip(event.provider_message_id),
        message_id=_clip(event.message_id),
        recipient=event.recipient[:320] if event.recipient else None,
    )
    if isinstance(chosen, str):
        _keep_unmatched(session, row_id, chosen)
        log.info("provider event unmatched", extra={"status": "unmatched"})
        return 0
    return int(_link_and_apply(session, row_id, chosen.intent_id, chosen.attempt_id, now))


def _choose_intent(
    session: Session,
    *,
    provider_message_id: str | None,
    message_id: str | None,
    recipient: str | None,
) -> Candidate | str:
    """Return the intent an event is about, or the reason it waits (``events.matching``)."""
    candidates = _candidates(session, provider_message_id, message_id, recipient)
    return choose(
        candidates,
        recipient=recipient,
        provider_message_id=provider_message_id,
        message_id=message_id,
    )


def _candidates(
    session: Session,
    provider_message_id: str | None,
    message_id: str | None,
    recipient: str | None,
) -> list[Candidate]:
    """The intents an event's Message-ID (when present) or else its provider id points at.

    Those to `recipient` when there are any; else the others, for the reason.
    """
    if message_id:
        named = select(Intent.id).where(Intent.message_id == message_id)
    elif provider_message_id:
        named = union(
            select(Attempt.intent_id).where(Attempt.provider_message_id == provider_message_id),
            select(Intent.id).where(Intent.provider_message_id == provider_message_id),
        )
    else:
        return []
    query = (
        select(Intent.id, Intent.recipient)
        .where(Intent.id.in_(named))
        .order_by(Intent.id)
        .limit(CANDIDATES_LOOKED_AT)
    )
    intents = []
    if recipient:
        to_recipient = func.lower(Intent.recipient) == recipient.strip().lower()
        intents = session.execute(query.where(to_recipient)).all()
    if not intents:
        intents = session.execute(query).all()
    if not intents:
        return []
    attempts: dict[int, int] = {}
    if provider_message_id:
        latest = (
            select(Attempt.intent_id, func.max(Attempt.id))
            .where(
                Attempt.provider_message_id == provider_message_id,
                Attempt.intent_id.in_([intent_id for intent_id, _ in intents]),
            )
            .group_by(Attempt.intent_id)
        )
        attempts = {intent_id: attempt_id for intent_id, attempt_id in session.execute(latest)}
    return [
        Candidate(intent_id, recipient, attempts.get(intent_id)) for intent_id, recipient in intents
    ]


def _keep_unmatched(session: Session, event_id: int, reason: str) -> None:
    """Say why the event still waits, unless it was matched meanwhile."""
    session.execute(
        update(ProviderEvent)
        .where(
            ProviderEvent.id == event_id,
            ProviderEvent.matched_at.is_(None),
            or_(ProviderEvent.unmatched_reason.is_(None), ProviderEvent.unmatched_reason != reason),
        )
        .values(unmatched_reason=reason)
    )


def _waiting_with_a_candidate(limit: int) -> list[Select[Any]]:
    """Queries of unmatched events that now have exactly one intent to their recipient.

    They mirror the rule of ``events.matching`` (Message-ID first, recipient
    always), so an event whose id is only on other recipients' intents, or on
    several of its recipient's, is not picked again and again; each event
    found is then decided by that rule itself.
    """
    waiting = ProviderEvent.matched_at.is_(None)
    to_its_recipient = or_(
        ProviderEvent.recipient.is_(None),
        func.lower(Intent.recipient) == func.lower(ProviderEvent.recipient),
    )
    one_intent = func.count(func.distinct(Intent.id)) == 1
    by_attempt = (
        select(ProviderEvent.id)
        .join(Attempt, Attempt.provider_message_id == ProviderEvent.provider_message_id)
        .join(Intent, Intent.id == Attempt.intent_id)
        .where(waiting, ProviderEvent.message_id.is_(None), to_its_recipient)
    )
    by_intent = (
        select(ProviderEvent.id)
        .join(Intent, Intent.provider_message_id == ProviderEvent.provider_message_id)
        .where(waiting, ProviderEvent.message_id.is_(None), to_its_recipient)
    )
    by_header = (
        select(ProviderEvent.id)
        .join(Intent, Intent.message_id == ProviderEvent.message_id)
        .where(waiting, to_its_recipient)
    )
    return [
        query.group_by(ProviderEvent.id).having(one_intent).order_by(ProviderEvent.id).limit(limit)
        for query in (by_attempt, by_intent, by_header)
    ]


def match_unmatched_events(
    session: Session, *, now: dt.datetime | None = None, limit: int = MATCH_BATCH_SIZE
) -> int:
    """Match waiting events whose message is now known; return how many were matched.

    The rule is the one a new event meets (``events.matching``). Safe to run
    from any number of processes at once: an event is linked by a
    compare-and-set on ``matched_at``, so its facts are applied exactly once.
    """
    now = now or utcnow()
    event_ids: set[int] = set()
    for query in _waiting_with_a_candidate(limit):
        event_ids.update(session.scalars(query))
    if not event_ids:
        return 0
    waiting = session.execute(
        select(
            ProviderEvent.id,
            ProviderEvent.provider_message_id,
            ProviderEvent.message_id,
            ProviderEvent.recipient,
        )
        .where(ProviderEvent.id.in_(sorted(event_ids)[:limit]))
        .order_by(ProviderEvent.id)
    ).all()
    matched = 0
    for event_id, provider_message_id, message_id, recipient in waiting:
        chosen = _choose_intent(
            session,
            provider_message_id=provider_message_id,
            message_id=message_id,
            recipient=recipient,
        )
        if isinstance(chosen, str):
            _keep_unmatched(session, event_id, chosen)
            continue
        matched += _link_and_apply(session, event_id, chosen.intent_id, chosen.attempt_id, now)
    if matched:
        log.info("matched waiting provider events", extra={"count": matched})
    return matched


def _link_and_apply(
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
        _resolve_ambiguous(session, intent, event, now)
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
    this_intent = Intent.id == intent_id
    if event.event_type == DELIVERED:
        condition, values = Intent.delivered_at.is_(None), {"delivered_at": happened_at}
    elif event.event_type == COMPLAINED:
        condition, values = Intent.complained_at.is_(None), {"complained_at": happened_at}
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
    session.execute(update(Intent).where(this_intent, condition).values(**values))


def _resolve_ambiguous(
    session: Session, intent: Intent, event: ProviderEvent, now: dt.datetime
) -> None:
    """Move an ambiguous intent to submitted: the provider has reported on its message."""
    reason = f"accepted: provider event {event.id} ({event.source} {event.event_type})"
    resolved = session.execute(
        update(Intent)
        .where(Intent.id == intent.id, Intent.status == AMBIGUOUS)
        .values(status=SUBMITTED, status_reason=reason, submitted_at=now, updated_at=now)
    )
    if resolved.rowcount != 1:
        return
    session.add(
        AuditEntry(
            actor=f"{EVENT_ACTOR_PREFIX}:{event.source}",
            action=RESOLVED_ACTION,
            intent_id=intent.id,
            reason=reason,
            before_status=AMBIGUOUS,
            after_status=SUBMITTED,
            details={"provider_event_id": event.id},
            created_at=now,
        )
    )
    log.info(
        "ambiguous intent resolved by a provider event",
        extra={"intent_id": intent.id, "status": SUBMITTED, "decision": "resolved"},
    )
