"""Read one intent by its idempotency key: the row a repeated enqueue returns."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.models import Intent


def intent_by_key(session: Session, key: str) -> Intent | None:
    """Return the intent holding idempotency key `key`, or None."""
    query = select(Intent).where(Intent.idempotency_key == key)
    return session.execute(query).scalar_one_or_none()
