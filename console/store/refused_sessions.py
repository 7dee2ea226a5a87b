"""Give back an intent whose attempt the relay refused at the session level (issue 14).

A refusal of our session, sender or credentials says nothing about the recipient: the
intent goes back to ``pending`` with the reason, its attempt row is removed and
``attempt_count`` restored, so it is not charged against the attempt cap (as
``claims.release`` does for claims never handed over). Compare-and-set on the lease
token: a stale worker changes nothing. The caller commits.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, bindparam

from console.store import send_statements as s
from console.store.claims import Claim

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
