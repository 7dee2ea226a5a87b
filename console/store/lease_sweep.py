"""Leases whose worker went silent (DESIGN §4.4): take them back, then settle each as decided.

The worker runs the two steps and decides in between; neither commits (the
worker's housekeeping transaction does):

- ``take_expired_leases``: intents still ``sending`` after their lease ran out;
  their open attempt is finished first, so its worker can no longer mark
  DATA_SENT — the stage it had reached is what the worker judges by;
- ``settle_expired_lease``: move the intent (compare-and-set on the lease
  token) and write the verdict on its attempt.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.models import Attempt, Intent
from console.store import send_statements as s
from console.vocabulary import CLAIMED, SENDING

SWEEP_BATCH_SIZE = 200


@dataclasses.dataclass(frozen=True)
class ExpiredLease:
    """An intent still ``sending`` after its lease ran out, and how far its attempt got."""

    intent: s.DueIntent
    lease_token: str
    attempt_id: int | None
    stage: str


def take_expired_leases(session: Session, *, now: dt.datetime) -> list[ExpiredLease]:
    """Find silent workers' intents and finish their attempts (up to a batch)."""
    query = (
        select(*s.DUE_COLUMNS, Intent.lease_token, Attempt.id)
        .outerjoin(
            Attempt,
            (Attempt.intent_id == Intent.id) & (Attempt.lease_token == Intent.lease_token),
        )
        .where(Intent.status == SENDING, Intent.lease_expires_at < now)
        .limit(SWEEP_BATCH_SIZE)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=Intent)
    leases = (_finish_silent_attempt(session, row, now) for row in session.execute(query).all())
    return [lease for lease in leases if lease is not None]


def _finish_silent_attempt(session: Session, row: Any, now: dt.datetime) -> ExpiredLease | None:
    """Finish the attempt first: from then on its worker can no longer mark DATA_SENT."""
    intent, lease_token, attempt_id = s.DueIntent.from_row(row), row[-2], row[-1]
    if attempt_id is None:
        return ExpiredLease(intent, lease_token, None, CLAIMED)
    finished = session.connection().execute(
        s.FINISH_SILENT_ATTEMPT, {"b_id": attempt_id, "b_now": now}
    )
    stage = finished.scalar_one_or_none()
    if stage is None:
        return None
    return ExpiredLease(intent, lease_token, attempt_id, stage)


def settle_expired_lease(
    session: Session,
    lease: ExpiredLease,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> bool:
    """Move the intent of `lease` as decided, if no one else did meanwhile."""
    connection = session.connection()
    moved = connection.execute(
        s.MOVE_LEASED_INTENT,
        dict(
            b_id=lease.intent.id,
            b_token=lease.lease_token,
            b_status=decision.status,
            b_reason=s.clip(decision.reason, s.ERROR_TEXT_LIMIT),
            b_now=now,
            b_next_attempt_at=decision.next_attempt_at,
            b_submitted_at=None,
            b_submitted_provider_id=None,
        ),
    )
    if moved.rowcount != 1:
        return False
    if lease.attempt_id is not None:
        connection.execute(
            s.JUDGE_SILENT_ATTEMPT,
            dict(
                b_id=lease.attempt_id,
                b_outcome=classification.outcome,
                b_error=s.clip(classification.reason, s.ERROR_TEXT_LIMIT),
            ),
        )
    return True
