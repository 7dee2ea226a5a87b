"""The demo's own rows beside its mail: written once, however often the demo starts."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.models import Suppression


def suppress_once(
    session: Session, recipient: str, *, reason: str, note: str, now: dt.datetime
) -> None:
    """Put `recipient` on the suppression list unless it is there already (no commit)."""
    query = select(Suppression.id).where(Suppression.recipient == recipient)
    if session.execute(query).first() is not None:
        return
    session.add(Suppression(recipient=recipient, reason=reason, note=note, created_at=now))
    session.flush()
