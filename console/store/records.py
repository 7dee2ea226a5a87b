"""T2 of the send loop: the values an outcome is recorded with (the engines' ``record``
binds them), and the release of an intent whose attempt the relay refused at the session
level. Each write is guarded by the lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, bindparam

from console.core.classify import enhanced_status_of
from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.store import statements as s
from console.store.claims import Claim
from console.vocabulary import SUBMITTED


def record_values(
    claim: Claim,
    result: SendResult,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> dict[str, Any]:
    """The values T2 binds for one attempt (``Engine.record``)."""
    submitted = decision.status == SUBMITTED
    return dict(
        b_id=claim.intent.id,
        b_token=claim.lease_token,
        b_status=decision.status,
        b_reason=s.clip(decision.reason, s.ERROR_TEXT_LIMIT),
        b_now=now,
        b_next_attempt_at=decision.next_attempt_at,
        b_submitted_at=now if submitted else None,
        b_submitted_provider_id=result.provider_message_id if submitted else None,
        b_attempt_id=claim.attempt_id,
        b_stage=result.stage,
        b_outcome=classification.outcome,
        b_reply_code=result.code,
        b_enhanced_status=_enhanced_status(result),
        b_reply_text=s.clip(result.reply_text, s.REPLY_TEXT_LIMIT),
        b_error=s.clip(result.error, s.ERROR_TEXT_LIMIT),
        b_provider_message_id=result.provider_message_id,
        b_duration_ms=result.duration_ms,
    )


def _enhanced_status(result: SendResult) -> str | None:
    if result.protocol != "smtp":
        return result.enhanced_status
    return result.enhanced_status or enhanced_status_of(result.reply_text)


# A refusal of our session, sender or credentials says nothing about the recipient: the intent goes
# back to ``pending`` with the reason, its attempt row is removed and ``attempt_count`` restored,
# so it is not charged against the attempt cap (as ``claims.release`` does for claims never handed
# over). Compare-and-set on the lease token: a stale worker changes nothing. The caller commits.

RELEASE_REFUSED = s.RELEASE_INTENT.values(status_reason=bindparam("b_reason"))


def release_refused(
    connection: Connection, claim: Claim, now: dt.datetime, due_at: dt.datetime, reason: str
) -> bool:
    """Put the intent back to pending at `due_at`, uncharged; False for a stale lease."""
    values = dict(
        b_id=claim.intent.id,
        b_token=claim.lease_token,
        b_now=now,
        b_due_at=due_at,
        b_reason=s.clip(reason, s.ERROR_TEXT_LIMIT),
    )
    if connection.execute(RELEASE_REFUSED, values).rowcount != 1:
        return False
    connection.execute(s.DELETE_ATTEMPT, {"b_id": claim.attempt_id})
    return True
