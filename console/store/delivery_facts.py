"""The provider's latest word on an intent, read from the fact columns the events wrote, and
the search's filters by fact: every list shows one without a join.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import ColumnElement

from console.events import PERMANENT
from console.models import Intent
from console.store.sender_rates import RATE_WINDOWS

DELIVERED = "delivered"
DEFERRED = "deferred"
BOUNCED = "bounced"
COMPLAINED = "complained"
REJECTED = "rejected"
# the facts in the order they outrank one another at the same moment
FACT_KINDS = (DEFERRED, DELIVERED, REJECTED, BOUNCED, COMPLAINED)
# the intent's column holding each fact's time
FACT_TIMES = {
    DELIVERED: Intent.delivered_at,
    DEFERRED: Intent.delayed_at,
    BOUNCED: Intent.bounced_at,
    COMPLAINED: Intent.complained_at,
    REJECTED: Intent.rejected_at,
}
FACT_COLUMNS = [*FACT_TIMES.values(), Intent.bounce_type]
HARD_BOUNCED = "hard_bounced"
# what the search's fact filter offers: the facts, and permanent bounces alone
FACT_FILTERS = (DELIVERED, DEFERRED, BOUNCED, HARD_BOUNCED, COMPLAINED, REJECTED)
WITHIN = tuple(RATE_WINDOWS)


@dataclasses.dataclass(frozen=True)
class DeliveryFact:
    """The provider's latest report on one intent: what and when."""

    kind: str  # one of FACT_KINDS
    at: dt.datetime
    bounce_type: str | None = None  # for a bounce: permanent, transient or undetermined


def latest_fact(row: Any) -> DeliveryFact | None:
    """The latest fact of a row carrying FACT_COLUMNS; None when the provider said nothing."""
    reported = [
        (at, FACT_KINDS.index(kind), kind)
        for kind, column in FACT_TIMES.items()
        if (at := getattr(row, column.key)) is not None
    ]
    if not reported:
        return None
    at, _, kind = max(reported)
    return DeliveryFact(kind, at, row.bounce_type if kind == BOUNCED else None)


def fact_conditions(fact: str, within: str | None, now: dt.datetime) -> list[ColumnElement[bool]]:
    """The intents the provider reported `fact` on, within a window of RATE_WINDOWS if given."""
    column = FACT_TIMES[BOUNCED if fact == HARD_BOUNCED else fact]
    conditions = [column.is_not(None)]
    if fact == HARD_BOUNCED:
        conditions.append(Intent.bounce_type == PERMANENT)
    if within is not None:
        conditions.append(column >= now - RATE_WINDOWS[within][1])
    return conditions
