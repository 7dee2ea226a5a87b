"""Read whether an address is on the suppression list."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.models import Suppression


def is_suppressed(session: Session, recipient: str) -> bool:
    """Return whether `recipient` is on the suppression list."""
    query = select(Suppression.id).where(Suppression.recipient == recipient.lower()).limit(1)
    return session.execute(query).first() is not None
