"""The one-use preview of a bulk action: its id rides in the confirmation and in the audit entries.

The search page puts a fresh id in each bulk link; ``confirmation_of`` finds, from the audit
entries that carry it, whether and how that preview was already confirmed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import AuditEntry

PREVIEW_ID_MAX_LENGTH = 64


def new_preview_id() -> str:
    """A fresh id for one bulk preview (the search page puts one in each bulk link)."""
    return secrets.token_urlsafe(12)


def valid_preview_id(value: str) -> bool:
    return 0 < len(value) <= PREVIEW_ID_MAX_LENGTH and all(c.isalnum() or c in "-_" for c in value)


@dataclasses.dataclass(frozen=True)
class BulkConfirmation:
    """A preview that was already confirmed: by whom, when, and how many intents it changed."""

    action: str
    actor: str
    confirmed_at: dt.datetime
    acted: int


def confirmation_of(
    session: Session, preview_id: str, action: str, *, since: dt.datetime
) -> BulkConfirmation | None:
    """Return how preview `preview_id` was confirmed (audit entries after `since`), if it was."""
    found = session.execute(
        select(AuditEntry.actor, func.min(AuditEntry.created_at), func.count())
        .where(
            AuditEntry.action == action,
            AuditEntry.created_at >= since,
            AuditEntry.details["preview"].as_string() == preview_id,
        )
        .group_by(AuditEntry.actor)
        .order_by(func.min(AuditEntry.created_at))
    ).first()
    if found is None:
        return None
    actor, confirmed_at, acted = found
    return BulkConfirmation(action, actor, confirmed_at, acted)
