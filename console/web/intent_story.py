"""One intent's story in time order, as its page tells it: event, attempts, provider events,
operator actions, suppression and possible duplicates, each a titled entry with its facts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy.orm import Session

from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression
from console.store.duplicate_sends import (
    AUTOMATIC_RESEND,
    OPERATOR_RESEND,
    SECOND_DELIVERY,
    PossibleDuplicate,
)
from console.store.intents import intent_story

_EXPLAINED = {
    AUTOMATIC_RESEND: "resent by the worker after an attempt of unknown outcome",
    OPERATOR_RESEND: "resent by an operator after an attempt of unknown outcome",
    SECOND_DELIVERY: "the provider reports a second delivery of this Message-ID",
}


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    at: dt.datetime
    kind: str  # created | attempt | provider_event | suppression | operator | duplicate
    title: str
    facts: list[tuple[str, Any]]  # label -> value, only the present ones
    actor: str | None = None
    event_id: int | None = None  # a provider event's own page


@dataclasses.dataclass(frozen=True)
class IntentDetail:
    intent: Intent
    timeline: list[TimelineEntry]
    suppression: Suppression | None
    attempt_count: int


def intent_detail(session: Session, intent_id: int) -> IntentDetail | None:
    """Return the intent and its whole story in time order, or None when unknown."""
    story = intent_story(session, intent_id)
    if story is None:
        return None
    timeline = [_created_entry(story.intent)]
    timeline += [_attempt_entry(attempt) for attempt in story.attempts]
    timeline += [_provider_event_entry(event) for event in story.events]
    timeline += [_operator_entry(entry) for entry in story.actions]
    timeline += _suppression_entries(story.intent, story.suppression)
    timeline += [_duplicate_entry(duplicate) for duplicate in story.duplicates]
    timeline.sort(key=lambda entry: entry.at)
    return IntentDetail(story.intent, timeline, story.suppression, len(story.attempts))


def _facts(*pairs: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [(label, value) for label, value in pairs if value not in (None, "")]


def _created_entry(intent: Intent) -> TimelineEntry:
    title = f"Business event {intent.event}" if intent.event else "Enqueued"
    facts = _facts(
        ("key", intent.idempotency_key),
        ("template", f"{intent.template}@{intent.template_version}"),
        ("lane", intent.lane),
        ("purpose", intent.purpose),
        ("expires", intent.expires_at),
    )
    return TimelineEntry(intent.created_at, "created", title, facts)


def _attempt_entry(attempt: Attempt) -> TimelineEntry:
    outcome = attempt.outcome or f"in progress ({attempt.stage})"
    facts = _facts(
        ("code", attempt.reply_code),
        ("enhanced status", attempt.enhanced_status),
        ("reply", attempt.reply_text),
        ("error", attempt.error),
        ("provider id", attempt.provider_message_id),
        ("stage reached", attempt.stage),
        ("duration", f"{attempt.duration_ms} ms" if attempt.duration_ms is not None else None),
        ("worker", attempt.worker_id),
    )
    title = f"Attempt {attempt.attempt_number}: {outcome}"
    return TimelineEntry(attempt.started_at, "attempt", title, facts, actor=attempt.worker_id)


def _provider_event_entry(event: ProviderEvent) -> TimelineEntry:
    kind = f"{event.event_type} ({event.bounce_type})" if event.bounce_type else event.event_type
    facts = _facts(
        ("source", event.source),
        ("recipient", event.recipient),
        ("diagnostic", event.diagnostic),
        ("provider id", event.provider_message_id),
        ("received", event.received_at),
    )
    at = event.occurred_at or event.received_at
    title = f"Provider: {kind}"
    return TimelineEntry(at, "provider_event", title, facts, actor=event.source, event_id=event.id)


def _operator_entry(entry: AuditEntry) -> TimelineEntry:
    change = (
        f"{entry.before_status} → {entry.after_status}"
        if entry.before_status != entry.after_status
        else None
    )
    details = entry.details or {}
    facts = _facts(
        ("status", change),
        ("reason", entry.reason),
        *((str(key).replace("_", " "), value) for key, value in sorted(details.items())),
    )
    title = f"Operator: {entry.action.replace('_', ' ')}"
    return TimelineEntry(entry.created_at, "operator", title, facts, actor=entry.actor)


def _suppression_entries(intent: Intent, suppression: Suppression | None) -> list[TimelineEntry]:
    entries = []
    if suppression is not None:
        facts = _facts(("reason", suppression.reason), ("note", suppression.note))
        entries.append(
            TimelineEntry(
                suppression.created_at,
                "suppression",
                f"Recipient {suppression.recipient} suppressed",
                facts,
                actor=suppression.created_by,
            )
        )
    if intent.status == "suppressed":
        at = intent.updated_at or intent.created_at
        facts = _facts(("reason", intent.status_reason))
        entries.append(TimelineEntry(at, "suppression", "Held back: suppressed", facts))
    return entries


def _duplicate_entry(duplicate: PossibleDuplicate) -> TimelineEntry:
    facts = _facts(
        ("why", _EXPLAINED[duplicate.cause]),
        ("attempt", duplicate.attempt_number),
        ("provider event", duplicate.provider_event_id),
    )
    title = "Possible duplicate: may have reached the recipient twice"
    return TimelineEntry(duplicate.at, "duplicate", title, facts)
