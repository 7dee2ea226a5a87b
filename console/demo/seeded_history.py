"""The demo's earlier mail: intents it enqueues now and records as sent a while ago."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import update
from sqlalchemy.orm import Session

from console.models import Attempt, Intent
from console.vocabulary import ACCEPTED, PENDING, REPLY_READ, SUBMITTED

SEND_DURATION = dt.timedelta(milliseconds=140)


def record_earlier_send(
    session: Session, intent_id: int, *, provider_message_id: str, sent_at: dt.datetime
) -> bool:
    """Make a just-enqueued intent one accepted at `sent_at` (no commit); False if it was sent.

    Only an intent never tried changes: a demo started again leaves its mail as it is.
    """
    changed = session.execute(
        update(Intent)
        .where(Intent.id == intent_id, Intent.status == PENDING, Intent.attempt_count == 0)
        .values(
            status=SUBMITTED,
            attempt_count=1,
            created_at=sent_at - dt.timedelta(seconds=2),
            next_attempt_at=sent_at,
            updated_at=sent_at + SEND_DURATION,
            submitted_at=sent_at + SEND_DURATION,
            provider_message_id=provider_message_id,
        )
    ).rowcount
    if not changed:
        return False
    session.add(
        Attempt(
            intent_id=intent_id,
            attempt_number=1,
            lease_token=secrets.token_hex(16),
            worker_id="demo-history",
            stage=REPLY_READ,
            started_at=sent_at,
            finished_at=sent_at + SEND_DURATION,
            outcome=ACCEPTED,
            reply_code=250,
            enhanced_status="2.0.0",
            reply_text=f"2.0.0 Ok: queued as {provider_message_id}",
            provider_message_id=provider_message_id,
            duration_ms=int(SEND_DURATION.total_seconds() * 1000),
        )
    )
    session.flush()
    return True
