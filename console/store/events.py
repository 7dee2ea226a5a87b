"""Provider events: record them, show them, and ask the provider about ambiguous intents.

Every read and write of ``provider_event``, and what an event does to its intent: recording
(deduplicate, correlate, apply the facts, suppress), the console's feed and event page, the
reports about an endpoint's set-up, the keys of signed webhook requests already recorded,
and the provider lookups of ambiguous intents. None of these functions commits except the
replay keys' batched deletion.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    delete,
    func,
    or_,
    select,
    tuple_,
    union,
    update,
)
from sqlalchemy.orm import Session

from console.core.asking import Question
from console.events import (
    ACCEPTANCE_EVENTS,
    ACCEPTED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    DELIVERED,
    INBOUND_MAIL,
    MAX_EVENT_TYPE_LENGTH,
    NOT_SPAM,
    PERMANENT,
    REJECTED,
    SET_UP_EVENTS,
    TOPIC_UNSUBSCRIBED,
    ReportedEvent,
)
from console.events.matching import Candidate, choose
from console.events.metadata import names_intent, parse_reference
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.state_tables import WebhookReplayKey
from console.store.audit import audit_values, write_audit
from console.store.intent_actions import reconcile
from console.store.statements import PAGE_SIZE
from console.vocabulary import AMBIGUOUS, FAILED, SUBMITTED

# Recording ---------------------------------------------------------------------------------------
#
# Recording provider events: deduplicate, correlate, apply facts, suppress.
#
# Every function works inside the caller's transaction and never commits, so a webhook acknowledges
# only once the whole effect of its events is durable.
#
# - An event is inserted with UNIQUE(source, source_event_id): a redelivery inserts nothing and
#   changes nothing.
# - Our reference, when the provider's metadata brought it back (``console.events.metadata``),
#   names the intent first: the event takes that intent's Message-ID. So does a Message-ID the
#   provider may have written itself (``ReportedEvent.relay_message_id``), but only when an intent
#   has exactly it.
# - It is matched to its intent by the rule of ``console.events.matching``: its Message-ID when
#   present, else its provider message id (any of its spellings, on the intent or on one of its
#   attempts), together with the recipient it names — provider ids repeat, so an event is never
#   attached to another recipient's intent. One that matches no intent, or several, stays unmatched
#   (``intent_id`` and ``matched_at`` NULL, the reason in ``unmatched_reason``) until
#   ``match_unmatched_events`` finds exactly one by the same rule.
# - A permanent bounce or a complaint puts the recipient on the suppression list, naming the event;
#   a transient or undetermined bounce does not. So does an event that says the provider keeps the
#   address on its own list (``ReportedEvent.suppress_as``, e.g. ``ses-account``). Only a real
#   address is suppressed (one, of valid syntax); an event naming anything else is kept unmatched
#   as "not suppressed: invalid address".
# - What a matched event does to its intent (facts, ambiguous → submitted, never sent → failed) is
#   ``link_and_apply`` (below).
# - A report about an endpoint's set-up (``ReportedEvent.never_matched``) is stored with that
#   reason and never matched.
#
# The queries of the console's event pages are further down.

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
    insert = _dialect_insert(session)
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
    """Upsert the recipient's suppression; a complaint outranks an earlier bounce."""
    assert event.recipient is not None
    recipient = event.recipient.lower()[:320]
    reason = event.suppression_reason
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


# Facts -------------------------------------------------------------------------------------------
#
# What a matched provider event does to its intent: link, facts, and the status it settles.
#
# Works inside the caller's transaction and never commits (the store's rule).
#
# - Facts are separate columns, each written once: ``delivered_at``, ``bounced_at`` with type and
#   diagnostic (a permanent bounce replaces an earlier transient one), ``complained_at``,
#   ``delayed_at`` with its reason, ``rejected_at`` with its reason. A late delivery never clears a
#   complaint.
# - An event that proves the provider took the message (``ACCEPTANCE_EVENTS``) moves an
#   ``ambiguous`` intent to ``submitted``.
# - A ``rejected`` event (the provider will never send it) moves an ``ambiguous`` or ``submitted``
#   intent to ``failed``, naming the reason.
# Each change of status is audited as the provider event's doing.

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


# Provider lookups --------------------------------------------------------------------------------
#
# The ambiguous intents to ask the provider about, and what its answer writes.
#
# An intent is asked about while it is ``ambiguous`` and carries no "not found" note about its last
# attempt. What the provider found is recorded as its events are (``record_events``: accepted or
# delivered settles it as ``submitted``, a bounce or a rejection as that event does). "Not found"
# after the provider's horizon either resends the intent as it was (``reconcile``, an audited
# action) or records a ``not_found`` note against it, which stays on its page and stops the asking
# until the next attempt. An operator may ask about one ambiguous intent at any time; that asking
# is audited. What is asked comes from ``console.store.questions``. The functions never commit.

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


# Feed --------------------------------------------------------------------------------------------
#
# The feed of provider events: every event newest first, filtered, one keyset page at a time.
#
# Each filter is served by an index or by a scan that stops after a page: newest first is the
# primary key; unmatched events come from the index on `matched_at`; a recipient's events are those
# of the intents to that address (the recipient index, then the events' `intent_id` index) together
# with the unmatched events naming it, so no filter reads the whole table.

EVENT_TYPES = (
    DELIVERED,
    BOUNCED,
    COMPLAINED,
    DELAYED,
    ACCEPTED,
    REJECTED,
    NOT_SPAM,
    *SET_UP_EVENTS,
)
EVENT_SOURCES = ("ses", "webhook", "resend", "postmark", "mailgun", "sendgrid")
MATCHED = "matched"
UNMATCHED = "unmatched"
MATCH_STATES = (MATCHED, UNMATCHED)
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


class InvalidEventFilter(ValueError):
    """An event filter has a value the console does not accept; the message names it."""


@dataclasses.dataclass(frozen=True)
class EventFilters:
    """What the feed's filter form asks for."""

    type: str | None = None
    source: str | None = None
    recipient: str | None = None
    match: str | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> EventFilters:
        """Read filters from query arguments; InvalidEventFilter on a value that cannot be."""
        values = {name: (args.get(name) or "").strip() or None for name in ("type", "source")}
        for name, longest in (("type", MAX_EVENT_TYPE_LENGTH), ("source", 50)):
            value = values[name]
            if value and (len(value) > longest or not _NAME.match(value)):
                raise InvalidEventFilter(f"unknown event {name} {value[:40]!r}")
        match = (args.get("match") or "").strip() or None
        if match and match not in MATCH_STATES:
            raise InvalidEventFilter(f"unknown match state {match[:40]!r}")
        recipient = (args.get("recipient") or "").strip()[:320] or None
        return cls(recipient=recipient, match=match, **values)

    def as_args(self) -> dict[str, str]:
        """Return the non-empty filters as query arguments (for links)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value}


@dataclasses.dataclass(frozen=True)
class FeedRow:
    id: int
    received_at: dt.datetime
    source: str
    event_type: str
    bounce_type: str | None
    recipient: str | None
    provider_message_id: str | None
    message_id: str | None
    intent_id: int | None
    matched_at: dt.datetime | None
    unmatched_reason: str | None
    intent_status: str | None


@dataclasses.dataclass(frozen=True)
class FeedPage:
    rows: list[FeedRow]
    next_before: int | None  # pass as `before` for the next (older) page; None on the last


_COLUMNS = [getattr(ProviderEvent, field.name) for field in dataclasses.fields(FeedRow)[:-1]] + [
    Intent.status
]


def events_page(
    session: Session,
    filters: EventFilters,
    *,
    before: int | None = None,
    limit: int = PAGE_SIZE,
) -> FeedPage:
    """Return one page of events matching `filters`, newest first, older than id `before`."""
    conditions: list[ColumnElement[bool]] = []
    if filters.type:
        conditions.append(ProviderEvent.event_type == filters.type)
    if filters.source:
        conditions.append(ProviderEvent.source == filters.source)
    if filters.match == MATCHED:
        conditions.append(ProviderEvent.matched_at.is_not(None))
    elif filters.match == UNMATCHED:
        conditions.append(ProviderEvent.matched_at.is_(None))
    if before is not None:
        conditions.append(ProviderEvent.id < before)
    found: dict[int, FeedRow] = {}
    for branch, newest_first in _branches(filters):
        query = (
            select(*_COLUMNS)
            .outerjoin(Intent, Intent.id == ProviderEvent.intent_id)
            .where(*conditions, *branch)
            .order_by(newest_first.desc())
            .limit(limit + 1)
        )
        for row in session.execute(query):
            found[row.id] = FeedRow(*row)
    rows = sorted(found.values(), key=lambda row: row.id, reverse=True)
    next_before = rows[limit - 1].id if len(rows) > limit else None
    return FeedPage(rows[:limit], next_before)


Branch = tuple[list[ColumnElement[bool]], ColumnElement[int]]  # conditions, the id to sort on


def _branches(filters: EventFilters) -> list[Branch]:
    """One query without a recipient; with one, its intents' events and its unmatched ones.

    The unmatched events naming the recipient are sorted on `id + 0`: the primary
    key cannot serve that order, so the planners read the few unmatched events from
    their index instead of walking the whole table newest first for a rare address.
    """
    if not filters.recipient:
        return [([], ProviderEvent.id)]
    address = filters.recipient
    local, _, domain = address.rpartition("@")
    spellings = {address, address.lower(), f"{local}@{domain.lower()}" if local else address}
    to_address = select(Intent.id).where(Intent.recipient.in_(spellings))
    branches: list[Branch] = []
    if filters.match != UNMATCHED:
        branches.append(([ProviderEvent.intent_id.in_(to_address)], ProviderEvent.id))
    if filters.match != MATCHED:
        naming = [
            ProviderEvent.matched_at.is_(None),
            func.lower(ProviderEvent.recipient) == address.lower(),
        ]
        branches.append((naming, ProviderEvent.id + 0))
    return branches


def count_unmatched(session: Session) -> int:
    """Return how many events still wait for their intent."""
    query = select(func.count()).where(ProviderEvent.matched_at.is_(None))
    return session.execute(query).scalar_one()


# Event page --------------------------------------------------------------------------------------
#
# The query of the console's page of one provider event (the feed is above).


@dataclasses.dataclass(frozen=True)
class EventDetail:
    event: ProviderEvent
    intent: Intent | None
    suppressions: list[Suppression]  # the entries this event caused


def event_detail(session: Session, event_id: int) -> EventDetail | None:
    """Return one event with its intent and the suppressions it caused, or None."""
    event = session.get(ProviderEvent, event_id)
    if event is None:
        return None
    intent = session.get(Intent, event.intent_id) if event.intent_id is not None else None
    caused = select(Suppression).where(Suppression.source_event_id == event_id)
    return EventDetail(event, intent, list(session.scalars(caused)))


# Endpoint reports --------------------------------------------------------------------------------
#
# The reads behind the events endpoints' own alerts: set-up reports, on a partial index.
#
# Reports about an endpoint's set-up (``events.SET_UP_EVENTS``: an SNS topic unsubscribed, inbound
# mail at the events endpoint) are few; they live in the partial index
# ``ix_provider_event_set_up``, which these queries name by repeating its condition.

_SET_UP = ProviderEvent.event_type.in_(SET_UP_EVENTS)


def unsubscribed_since(session: Session, source: str) -> dt.datetime | None:
    """When `source`'s topic unsubscribed this endpoint, unless events of it arrived since."""
    newest = session.scalar(
        select(func.max(ProviderEvent.received_at)).where(
            _SET_UP,
            ProviderEvent.event_type == TOPIC_UNSUBSCRIBED,
            ProviderEvent.source == source,
        )
    )
    if newest is None:
        return None
    later = (
        select(ProviderEvent.id)
        .where(
            ProviderEvent.received_at > newest,
            ProviderEvent.source == source,
            ProviderEvent.event_type.not_in(SET_UP_EVENTS),
        )
        .limit(1)
    )
    return None if session.scalar(later) is not None else newest


def inbound_since(session: Session, since: dt.datetime) -> tuple[int, dt.datetime | None]:
    """Count inbound-mail reports received since `since`; return (count, newest)."""
    query = select(func.count(), func.max(ProviderEvent.received_at)).where(
        _SET_UP, ProviderEvent.event_type == INBOUND_MAIL, ProviderEvent.received_at >= since
    )
    count, newest = session.execute(query).one()
    return count, newest


# Replay keys -------------------------------------------------------------------------------------
#
# The keys of signed webhook requests already recorded, shared by every process.
#
# A provider's signature carries a time, and a request older than the provider's window is refused
# by its verifier. Within the window, the key of each request (Mailgun's token, Svix's id and time,
# SendGrid's time and body digest) is inserted in the same transaction as the request's events: a
# key already there is a replay, whichever process or restart it reaches, and whatever body it
# carries. A request refused or rolled back leaves no key, so the provider's retry of it is
# accepted. Only a digest of the key is stored; each row is kept until its ``expires_at`` and then
# deleted by the retention job.


def replay_key_digest(key: str) -> str:
    """The stored form of a request's key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def claim_replay_key(
    session: Session, *, source: str, key: str, now: dt.datetime, keep_seconds: float
) -> bool:
    """Insert the request's key in the caller's transaction; False when it was recorded before.

    Never commits. Two requests with one key in flight at once: the second waits for the
    first's transaction, and is a replay once it commits.
    """
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = (
        insert(WebhookReplayKey)
        .values(
            source=source,
            key_digest=replay_key_digest(key),
            expires_at=now + dt.timedelta(seconds=keep_seconds),
        )
        .on_conflict_do_nothing(index_elements=["source", "key_digest"])
        .returning(WebhookReplayKey.source)
    )
    return session.execute(statement).scalar_one_or_none() is not None


def delete_expired_replay_keys(
    session_factory: Callable[[], Session], now: dt.datetime, batch_size: int
) -> int:
    """Delete up to `batch_size` keys whose time is over; commits. Return how many."""
    with session_factory() as session, session.begin():
        expired = (
            select(WebhookReplayKey.source, WebhookReplayKey.key_digest)
            .where(WebhookReplayKey.expires_at < now)
            .order_by(WebhookReplayKey.expires_at)
            .limit(batch_size)
        )
        keys = tuple_(WebhookReplayKey.source, WebhookReplayKey.key_digest)
        deleted = session.execute(
            delete(WebhookReplayKey).where(keys.in_(expired.subquery().select())),
            execution_options={"synchronize_session": False},
        )
        return deleted.rowcount
