"""The query of the console's page of one provider event (the feed is in store.event_feed)."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.models import Intent, ProviderEvent, Suppression


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
