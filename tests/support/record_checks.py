"""Outcomes of each kind to record, and the columns a record writes, to compare recordings."""

from __future__ import annotations

import datetime as dt

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.vocabulary import (
    ACCEPTED,
    DATA_SENT,
    FAILED,
    PENDING,
    PERMANENT,
    REPLY_READ,
    SUBMITTED,
    TRANSIENT,
)
from tests.support.claim_steps import load, seconds

INTENT_COLUMNS = (
    "status",
    "status_reason",
    "next_attempt_at",
    "submitted_at",
    "provider_message_id",
    "lease_token",
    "lease_expires_at",
    "updated_at",
    "attempt_count",
)
ATTEMPT_COLUMNS = (
    "stage",
    "finished_at",
    "outcome",
    "reply_code",
    "enhanced_status",
    "reply_text",
    "error",
    "provider_message_id",
    "duration_ms",
)


def outcomes_of_each_kind(now: dt.datetime):
    """(result, classification, decision): accepted, a retry, a permanent refusal."""
    return [
        (
            SendResult(
                REPLY_READ,
                code=250,
                reply_text="2.0.0 Ok: queued as Q7",
                provider_message_id="Q7",
                duration_ms=12,
            ),
            Classification(ACCEPTED, "accepted"),
            Decision(SUBMITTED),
        ),
        (
            SendResult(REPLY_READ, code=451, reply_text="4.3.0 try later", duration_ms=30),
            Classification(TRANSIENT, "temporary failure"),
            Decision(PENDING, "retry: 451 4.3.0 try later", now + seconds(45)),
        ),
        (
            SendResult(DATA_SENT, code=550, reply_text="5.1.1 no such user", error="x" * 1500),
            Classification(PERMANENT, "refused"),
            Decision(FAILED, "refused: 550"),
        ),
    ]


def row_values(session_factory, intent_id: int) -> tuple[tuple, tuple]:
    intent, [attempt] = load(session_factory, intent_id)
    return (
        tuple(getattr(intent, name) for name in INTENT_COLUMNS),
        tuple(getattr(attempt, name) for name in ATTEMPT_COLUMNS),
    )
