"""The last attempt of each intent on a page of results: its outcome, code and reply."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Attempt


@dataclasses.dataclass(frozen=True)
class LastAttempt:
    intent_id: int
    attempt_number: int
    stage: str
    outcome: str | None  # None while the attempt is in progress
    reply_code: int | None
    enhanced_status: str | None
    reply_text: str | None
    error: str | None


_COLUMNS = [getattr(Attempt, field.name) for field in dataclasses.fields(LastAttempt)]


def last_attempts(session: Session, intent_ids: Collection[int]) -> dict[int, LastAttempt]:
    """Return each intent's latest attempt by intent id (intents never tried are absent)."""
    if not intent_ids:
        return {}
    latest = (
        select(func.max(Attempt.id))
        .where(Attempt.intent_id.in_(intent_ids))
        .group_by(Attempt.intent_id)
    )
    query = select(*_COLUMNS).where(Attempt.id.in_(latest))
    return {row.intent_id: LastAttempt(*row) for row in session.execute(query)}
