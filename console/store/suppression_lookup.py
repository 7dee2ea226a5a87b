"""Read whether an address is on the suppression list."""

from __future__ import annotations

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from console.models import Suppression


def is_suppressed(session: Session, recipient: str) -> bool:
    """Return whether `recipient` is on the suppression list."""
    query = select(Suppression.id).where(Suppression.recipient == recipient.lower()).limit(1)
    return session.execute(query).first() is not None


def is_suppressed_now(connection: Connection, recipient: str) -> bool:
    """Return whether `recipient` is on the list as of now: one indexed lookup.

    Ends its read at once, so a suppression committed later is seen by the next call
    (on SQLite an open read would keep seeing the old snapshot).
    """
    query = select(Suppression.id).where(Suppression.recipient == recipient.lower()).limit(1)
    found = connection.execute(query).first() is not None
    connection.commit()
    return found
