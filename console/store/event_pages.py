"""The queries of the console's event pages: events waiting for their intent, and one event."""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Intent, ProviderEvent, Suppression
from console.store.sql import PAGE_SIZE


@dataclasses.dataclass(frozen=True)
class EventPage:
    events: list[ProviderEvent]
    next_before: int | None  # the keyset cursor of the next (older) page


def unmatched_events_page(
    session: Session, *, before: int | None = None, limit: int = PAGE_SIZE
) -> EventPage:
    """Return events still waiting for their intent, newest first, keyset-paginated by id."""
    query = (
        select(ProviderEvent)
        .where(ProviderEvent.matched_at.is_(None))
        .order_by(ProviderEvent.id.desc())
        .limit(limit + 1)
    )
    if before is not None:
        query = query.where(ProviderEvent.id < before)
    events = list(session.scalars(query))
    next_before = events[limit - 1].id if len(events) > limit else None
    return EventPage(events[:limit], next_before)


def count_unmatched_events(session: Session) -> int:
    """Return how many events still wait for their intent."""
    query = select(func.count()).where(ProviderEvent.matched_at.is_(None))
    return session.execute(query).scalar_one()


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
