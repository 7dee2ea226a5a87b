"""T2 of the send loop, the records: what an attempt writes once the relay has answered.

The per-message writes (the ``data_sent`` mark, the outcome recorded under the lease) and
the release of an intent whose attempt the relay refused at the session level. Each is
guarded by the lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, Engine, bindparam

from console.core.classify import enhanced_status_of
from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.store import statements as s
from console.store.claims import Claim
from console.vocabulary import SUBMITTED

# Attempt records ---------------------------------------------------------------------------------
#
# T2 of the send loop: the per-message writes, each its own short transaction.
#
# ``mark_data_sent`` commits "the body may leave now" before it does; ``record_outcome`` moves the
# intent only if this lease still holds it (compare-and-set on the lease token). Both commit (or
# roll back) themselves, on the connection ``writer`` gives: in autocommit mode on PostgreSQL,
# where each is one atomic statement.


def writer(engine: Engine) -> Connection:
    """A connection for the per-message writes of one tick.

    Each of them is a single atomic statement on PostgreSQL, so the connection is
    in autocommit mode there: one round trip per write.
    """
    connection = engine.connect()
    if engine.dialect.name == "postgresql":
        return connection.execution_options(isolation_level="AUTOCOMMIT")
    return connection


def mark_data_sent(connection: Connection, attempt_id: int) -> bool:
    """Commit that the body is about to leave; False when the lease was swept meanwhile."""
    marked = connection.execute(s.MARK_DATA_SENT, {"b_id": attempt_id}).rowcount == 1
    connection.commit()
    return marked


def mark_data_sent_unless_suppressed(
    connection: Connection, attempt_id: int, recipient_forms: list[str]
) -> bool:
    """Commit that the body is about to leave, in one statement that also checks the
    suppression list (`recipient_forms`: the address, maybe its keyed hash).

    False when the recipient was suppressed or the lease swept meanwhile; nothing
    was marked then (``suppressions.is_suppressed_now`` tells which).
    """
    address, address_hash = recipient_forms[0], recipient_forms[-1]
    values = {"b_id": attempt_id, "b_address": address, "b_address_hash": address_hash}
    if not s.runs_on(connection):
        marked = connection.execute(s.MARK_DATA_SENT_UNLESS_SUPPRESSED, values).rowcount == 1
        connection.commit()
        return marked
    mark = s.prepared(s.MARK_DATA_SENT_UNLESS_SUPPRESSED, connection.dialect)
    marked = mark.execute(connection, values).rowcount == 1
    s.commit(connection)
    return marked


def record_outcome(
    connection: Connection,
    claim: Claim,
    result: SendResult,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> bool:
    """T2: move the intent only if this lease still holds it; False for a stale worker."""
    values = record_values(claim, result, classification, decision, now)
    return record_by_values(connection, values)


def record_by_values(connection: Connection, values: dict[str, Any]) -> bool:
    """``record_outcome`` of `values` (``record_values``): the intent moves only if this
    lease still holds it, committed; False for a stale worker, nothing changed."""
    if not s.runs_on(connection):
        return _record_with_core(connection, values)
    dialect = connection.dialect
    if dialect.name == "postgresql":
        moved = s.prepared(s.RECORD_IF_MOVED, dialect).execute(connection, values)
        recorded = moved.fetchone() is not None
    else:
        recorded = s.prepared(s.MOVE_LEASED_INTENT, dialect).execute(connection, values).rowcount
        if recorded:
            s.prepared(s.RECORD_ATTEMPT, dialect).execute(connection, values)
    if recorded:
        s.commit(connection)
    else:
        s.rollback(connection)
    return bool(recorded)


def record_values(
    claim: Claim,
    result: SendResult,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> dict[str, Any]:
    """The values T2 binds for one attempt (``record_outcome``)."""
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


def _record_with_core(connection: Connection, values: dict) -> bool:
    """``record_outcome`` inside a transaction already begun on `connection`."""
    if connection.dialect.name == "postgresql":
        recorded = connection.execute(s.RECORD_IF_MOVED, values).first() is not None
    else:
        recorded = connection.execute(s.MOVE_LEASED_INTENT, values).rowcount == 1
        if recorded:
            connection.execute(s.RECORD_ATTEMPT, values)
    if recorded:
        connection.commit()
    else:
        connection.rollback()
    return recorded


def _enhanced_status(result: SendResult) -> str | None:
    if result.protocol != "smtp":
        return result.enhanced_status
    return result.enhanced_status or enhanced_status_of(result.reply_text)


# Sessions the relay refused ----------------------------------------------------------------------
#
# Give back an intent whose attempt the relay refused at the session level.
#
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
