"""Recording provider events: deduplicate, correlate, apply facts, suppress.

Every function works inside the caller's transaction and never commits, so a webhook acknowledges
only once the whole effect of its events is durable.

- An event is inserted with UNIQUE(source, source_event_id): a redelivery inserts nothing and
  changes nothing.
- Our reference, when the provider's metadata brought it back (``console.events.metadata``),
  names the intent first: the event takes that intent's Message-ID. So does a Message-ID the
  provider may have written itself (``ReportedEvent.relay_message_id``), but only when an intent
  has exactly it.
- It is matched to its intent by the rule of ``console.events.matching``: its Message-ID when
  present, else its provider message id (any of its spellings, on the intent or on one of its
  attempts), together with the recipient it names — provider ids repeat, so an event is never
  attached to another recipient's intent. One that matches no intent, or several, stays unmatched
  (``intent_id`` and ``matched_at`` NULL, the reason in ``unmatched_reason``) until
  ``match_unmatched_events`` finds exactly one by the same rule.
- A permanent bounce or a complaint puts the recipient on the suppression list, naming the event;
  a transient or undetermined bounce does not. So does an event that says the provider keeps the
  address on its own list (``ReportedEvent.suppress_as``, e.g. ``ses-account``). Only a real
  address is suppressed (one, of valid syntax); an event naming anything else is kept unmatched
  as "not suppressed: invalid address".
- What a matched event does to its intent (facts, ambiguous → submitted, never sent → failed) is
  ``console.store.event_facts.link_and_apply``.
- A report about an endpoint's set-up (``ReportedEvent.never_matched``) is stored with that
  reason and never matched.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

from sqlalchemy import Select, func, or_, select, union, update
from sqlalchemy.orm import Session

from console.events import ReportedEvent
from console.events.matching import Candidate, choose
from console.events.metadata import names_intent, parse_reference
from console.models import Attempt, Intent, ProviderEvent, utcnow
from console.store.event_facts import EVENT_ACTOR_PREFIX, link_and_apply
from console.store.sql_helpers import dialect_of, insert_for
from console.store.suppressions import suppress_for_event

log = logging.getLogger(__name__)

MATCH_BATCH_SIZE = 500
NOT_SUPPRESSED_INVALID_ADDRESS = "not suppressed: invalid address"
CANDIDATES_LOOKED_AT = 50  # intents sharing one provider id: enough to tell or to say why


@dataclasses.dataclass
class RecordSummary:
    """What recording a batch of reported events did."""

    inserted: int = 0
    duplicates: int = 0
    matched: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def record_events(
    session: Session, events: list[ReportedEvent], *, now: dt.datetime | None = None
) -> RecordSummary:
    """Store each event once, suppress, and match what can be matched now."""
    now = now or utcnow()
    summary = RecordSummary()
    for event in events:
        event = _with_our_message_id(session, event)
        row_id = _insert_once(session, event, now)
        if row_id is None:
            summary.duplicates += 1
            continue
        summary.inserted += 1
        if event.suppresses_recipient and not _one_valid_address(event.recipient):
            _keep_unmatched(session, row_id, NOT_SUPPRESSED_INVALID_ADDRESS)  # matches nothing
            log.warning("provider event names no valid address: not suppressed")
            continue
        if event.suppresses_recipient:
            _suppress(session, event, row_id, now)
        if event.never_matched:
            _keep_unmatched(session, row_id, event.never_matched)
            continue
        summary.matched += _match_new_event(session, row_id, event, now)
    return summary


def _with_our_message_id(session: Session, event: ReportedEvent) -> ReportedEvent:
    """The event with the Message-ID of the intent its reference names, else of the intent
    its relay's Message-ID is exactly; unchanged when neither names one of ours."""
    ours = _referenced_message_id(session, event.reference) if event.reference else None
    if ours is None and event.relay_message_id and not event.message_id:
        relayed = event.relay_message_id[:255]
        ours = session.scalar(select(Intent.message_id).where(Intent.message_id == relayed))
    return dataclasses.replace(event, message_id=ours) if ours else event


def _referenced_message_id(session: Session, reference: str) -> str | None:
    parsed = parse_reference(reference)
    if parsed is None:
        return None
    message_id = session.scalar(select(Intent.message_id).where(Intent.id == parsed[0]))
    return message_id if message_id and names_intent(reference, parsed[0], message_id) else None


def _insert_once(session: Session, event: ReportedEvent, now: dt.datetime) -> int | None:
    """INSERT ... ON CONFLICT DO NOTHING; the new row's id, or None for a redelivery."""
    insert = insert_for(dialect_of(session))
    statement = (
        insert(ProviderEvent)
        .values(
            source=event.source,
            source_event_id=event.source_event_id,
            event_type=event.event_type,
            bounce_type=event.bounce_type,
            subtype=_clip(event.subtype, 50),
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


def _one_valid_address(text: str | None) -> bool:
    """Whether `text` is one address of valid syntax (no display name, no list)."""
    from email_validator import EmailNotValidError, validate_email  # imported when needed

    try:
        validate_email(text or "", check_deliverability=False)
    except EmailNotValidError:
        return False
    return True


def _clip(value: str | None, limit: int = 255) -> str | None:
    return value[:limit] if value else None


def _suppress(session: Session, event: ReportedEvent, event_row_id: int, now: dt.datetime) -> None:
    """Put the event's recipient on the suppression list, naming the event."""
    assert event.recipient is not None
    suppress_for_event(
        session,
        recipient=event.recipient.lower()[:320],
        reason=event.suppression_reason,
        note=event.diagnostic,
        event_id=event_row_id,
        actor=f"{EVENT_ACTOR_PREFIX}:{event.source}",
        now=now,
    )


def _match_new_event(session: Session, row_id: int, event: ReportedEvent, now: dt.datetime) -> int:
    chosen = _choose_intent(
        session,
        provider_message_id=_clip(event.provider_message_id),
        message_id=_clip(event.message_id),
        recipient=event.recipient[:320] if event.recipient else None,
        other_provider_ids=tuple(i[:255] for i in event.other_provider_ids if i),
    )
    if isinstance(chosen, str):
        _keep_unmatched(session, row_id, chosen)
        log.info("provider event unmatched", extra={"status": "unmatched"})
        return 0
    return int(link_and_apply(session, row_id, chosen.intent_id, chosen.attempt_id, now))


def _choose_intent(
    session: Session,
    *,
    provider_message_id: str | None,
    message_id: str | None,
    recipient: str | None,
    other_provider_ids: tuple[str, ...] = (),
) -> Candidate | str:
    """Return the intent an event is about, or the reason it waits (``events.matching``)."""
    provider_ids = [i for i in (provider_message_id, *other_provider_ids) if i]
    candidates = _candidates(session, provider_ids, message_id, recipient)
    return choose(
        candidates,
        recipient=recipient,
        provider_message_id=provider_message_id,
        message_id=message_id,
    )


def _candidates(
    session: Session,
    provider_ids: list[str],
    message_id: str | None,
    recipient: str | None,
) -> list[Candidate]:
    """The intents an event's Message-ID (when present) or else its provider ids point at.

    Those to `recipient` when there are any; else the others, for the reason.
    """
    if message_id:
        named = select(Intent.id).where(Intent.message_id == message_id)
    elif provider_ids:
        named = union(
            select(Attempt.intent_id).where(Attempt.provider_message_id.in_(provider_ids)),
            select(Intent.id).where(Intent.provider_message_id.in_(provider_ids)),
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
    if provider_ids:
        latest = (
            select(Attempt.intent_id, func.max(Attempt.id))
            .where(
                Attempt.provider_message_id.in_(provider_ids),
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
        matched += link_and_apply(session, event_id, chosen.intent_id, chosen.attempt_id, now)
    if matched:
        log.info("matched waiting provider events", extra={"count": matched})
    return matched
