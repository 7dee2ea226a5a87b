"""The reads behind the events endpoints' own alerts: set-up reports, on a partial index.

Reports about an endpoint's set-up (``events.SET_UP_EVENTS``: an SNS topic unsubscribed, inbound
mail at the events endpoint) are few; they live in the partial index
``ix_provider_event_set_up``, which these queries name by repeating its condition.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.events import INBOUND_MAIL, SET_UP_EVENTS, TOPIC_UNSUBSCRIBED
from console.models import ProviderEvent

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
