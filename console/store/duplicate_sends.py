"""Sends that may have reached a person twice, read from attempts, audit entries and events.

Three causes:

- ``automatic_resend`` — an attempt that handed the message over (stage
  ``data_sent`` or later) after an earlier attempt of the same intent ended
  ``ambiguous``: the ``resend`` policy, or a lease that expired after the body left;
- ``operator_resend`` — the same, where an operator chose *resend* for the
  ambiguous intent (a ``reconcile_resend`` audit entry since the previous attempt);
- ``second_delivery`` — a ``delivered`` provider event for an intent that already
  had one: the provider says the message arrived twice.

Each is rare, so the queries start from index ranges (attempts by start time,
events by receipt time) and test the cause only on those rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import case, exists, func, literal, select
from sqlalchemy.orm import Session, aliased

from console.events import DELIVERED
from console.models import Attempt, AuditEntry, ProviderEvent
from console.vocabulary import AMBIGUOUS, DATA_SENT, REPLY_READ

AUTOMATIC_RESEND = "automatic_resend"
OPERATOR_RESEND = "operator_resend"
SECOND_DELIVERY = "second_delivery"
CAUSES = (AUTOMATIC_RESEND, OPERATOR_RESEND, SECOND_DELIVERY)
OPERATOR_RESEND_ACTION = "reconcile_resend"
LONGEST_ATTEMPT = dt.timedelta(days=1)  # leases are minutes: bounds the scan by start time


@dataclasses.dataclass(frozen=True)
class PossibleDuplicate:
    intent_id: int
    cause: str
    at: dt.datetime  # when the second copy left (attempt finished) or was reported
    attempt_number: int | None = None
    provider_event_id: int | None = None


def _resends():
    later, earlier, before = aliased(Attempt), aliased(Attempt), aliased(Attempt)
    after_ambiguity = exists().where(
        earlier.intent_id == later.intent_id,
        earlier.attempt_number < later.attempt_number,
        earlier.outcome == AMBIGUOUS,
    )
    previous_start = (
        select(func.max(before.started_at))
        .where(before.intent_id == later.intent_id, before.attempt_number < later.attempt_number)
        .scalar_subquery()
    )
    by_operator = exists().where(
        AuditEntry.intent_id == later.intent_id,
        AuditEntry.action == OPERATOR_RESEND_ACTION,
        AuditEntry.created_at >= previous_start,
        AuditEntry.created_at <= later.started_at,
    )
    cause = case((by_operator, literal(OPERATOR_RESEND)), else_=literal(AUTOMATIC_RESEND))
    query = select(
        later.intent_id, cause.label("cause"), later.finished_at, later.attempt_number
    ).where(
        later.attempt_number > 1,
        later.stage.in_((DATA_SENT, REPLY_READ)),
        later.finished_at.is_not(None),
        after_ambiguity,
    )
    return later, query


def _second_deliveries():
    first = aliased(ProviderEvent)
    already_delivered = exists().where(
        first.intent_id == ProviderEvent.intent_id,
        first.event_type == DELIVERED,
        first.id < ProviderEvent.id,
    )
    return select(ProviderEvent.intent_id, ProviderEvent.received_at, ProviderEvent.id).where(
        ProviderEvent.event_type == DELIVERED,
        ProviderEvent.intent_id.is_not(None),
        already_delivered,
    )


def possible_duplicates(
    session: Session, since: dt.datetime, until: dt.datetime
) -> list[PossibleDuplicate]:
    """Every possible duplicate whose second copy left or was reported in [since, until)."""
    later, resends = _resends()
    resends = resends.where(
        later.started_at >= since - LONGEST_ATTEMPT,
        later.finished_at >= since,
        later.finished_at < until,
    )
    deliveries = _second_deliveries().where(
        ProviderEvent.received_at >= since, ProviderEvent.received_at < until
    )
    return _collect(session, resends, deliveries)


def possible_duplicates_of(session: Session, intent_id: int) -> list[PossibleDuplicate]:
    """The possible duplicates of one intent, for its timeline."""
    later, resends = _resends()
    deliveries = _second_deliveries().where(ProviderEvent.intent_id == intent_id)
    return _collect(session, resends.where(later.intent_id == intent_id), deliveries)


def _collect(session: Session, resends, deliveries) -> list[PossibleDuplicate]:
    found = [
        PossibleDuplicate(row.intent_id, row.cause, row.finished_at, row.attempt_number)
        for row in session.execute(resends)
    ]
    found += [
        PossibleDuplicate(row.intent_id, SECOND_DELIVERY, row.received_at, provider_event_id=row.id)
        for row in session.execute(deliveries)
    ]
    return sorted(found, key=lambda duplicate: duplicate.at)


def count_by_cause(duplicates: list[PossibleDuplicate]) -> dict[str, int]:
    """How many of `duplicates` each cause has, every cause present (0 when none)."""
    counts = dict.fromkeys(CAUSES, 0)
    for duplicate in duplicates:
        counts[duplicate.cause] += 1
    return counts
