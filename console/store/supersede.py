"""Cancel an intent not sent yet, by its key: the statement ``outbox.supersede`` runs."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import update
from sqlalchemy.orm import Session

from console.models import Intent
from console.vocabulary import CANCELLED, DEAD, FAILED, PENDING

# Not sent, and nobody is sending it: waiting, or stopped where an operator might requeue it.
SUPERSEDABLE_STATUSES = (PENDING, FAILED, DEAD)


def cancel_unsent(session: Session, key: str, reason: str, now: dt.datetime) -> bool:
    """Make the intent holding `key` cancelled with `reason` if it is supersedable.

    Return whether a row changed. Works in the caller's transaction and never
    commits; an Intent the session already holds shows the new status.
    """
    statement = (
        update(Intent)
        .where(Intent.idempotency_key == key, Intent.status.in_(SUPERSEDABLE_STATUSES))
        .values(status=CANCELLED, status_reason=reason, updated_at=now)
        .returning(Intent.id)
        .execution_options(synchronize_session="fetch")
    )
    return session.execute(statement).first() is not None
