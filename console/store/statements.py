"""The send loop's statements, the columns of a due intent, and what each database spells
its own way (``SqlKit``, one per engine).

The statements are built once here (each execution only binds values); the claim, the
lease sweep and the records use them. SQLite's engine runs the per-message ones compiled
once (``console.engine.sqlite_prepared``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    String,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)

from console.model_columns import UTCDateTime
from console.models import Attempt, Intent, Suppression
from console.vocabulary import DATA_SENT, PENDING, SENDING

REPLY_TEXT_LIMIT = 2000
ERROR_TEXT_LIMIT = 1000

DUE_COLUMNS = tuple(
    Intent.__table__.c[name]
    for name in (
        "id",
        "message_id",
        "idempotency_key",
        "recipient",
        "template",
        "template_version",
        "params",
        "lane",
        "purpose",
        "event",
        "created_at",
        "expires_at",
        "attempt_count",
        "next_attempt_at",
        "attempts_granted",
    )
)


INTENT = Intent.__table__
ATTEMPT = Attempt.__table__


def _when(name: str):
    return bindparam(name, type_=UTCDateTime())


def _or_unchanged(name: str, column, type_):
    """SET column = :name, or leave it as it is when the value bound is NULL."""
    return func.coalesce(bindparam(name, type_=type_), column)


LEASE_INTENT = (
    update(INTENT)
    .where(INTENT.c.id == bindparam("b_id"))
    .values(
        status=SENDING,
        lease_token=bindparam("b_token"),
        lease_expires_at=_when("b_lease_expires_at"),
        attempt_count=bindparam("b_attempt_count"),
        updated_at=_when("b_now"),
    )
)
# An intent leaving `sending`: its new status and reason, the lease dropped.
LEASE_RELEASED = dict(
    status=bindparam("b_status"),
    status_reason=bindparam("b_reason"),
    lease_token=None,
    lease_expires_at=None,
    updated_at=_when("b_now"),
    next_attempt_at=_or_unchanged("b_next_attempt_at", INTENT.c.next_attempt_at, UTCDateTime()),
)
CLOSE_UNSENT = update(INTENT).where(INTENT.c.id == bindparam("b_id")).values(**LEASE_RELEASED)
# Rows come back in any order; each attempt's lease token is unique and maps them.
INSERT_ATTEMPTS = insert(ATTEMPT).returning(ATTEMPT.c.lease_token, ATTEMPT.c.id)
MARK_DATA_SENT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.id == bindparam("b_id"), ATTEMPT.c.finished_at.is_(None))
    .values(stage=DATA_SENT)
)
# The same mark, only while the recipient (either form: the address, its keyed hash)
# is not on the suppression list: the last check before the body is the mark itself.
SUPPRESSION = Suppression.__table__
MARK_DATA_SENT_UNLESS_SUPPRESSED = MARK_DATA_SENT.where(
    ~exists().where(
        SUPPRESSION.c.recipient.in_([bindparam("b_address"), bindparam("b_address_hash")])
    )
)
# Compare-and-set: only the holder of the current lease token moves a `sending` intent.
# The row is found by its key: `IS NOT DISTINCT FROM` (the same test here, neither side
# is NULL) is not an indexable operator, so PostgreSQL cannot choose the status indexes
# for it; with statistics of a table just filled it did (ties of one estimated row),
# and read every `sending` row of the index for each record.
HELD_BY_THIS_LEASE = (
    INTENT.c.id == bindparam("b_id"),
    INTENT.c.status.is_not_distinct_from(SENDING),
    INTENT.c.lease_token.is_not_distinct_from(bindparam("b_token")),
)
MOVE_LEASED_INTENT = (
    update(INTENT)
    .where(*HELD_BY_THIS_LEASE)
    .values(
        **LEASE_RELEASED,
        submitted_at=_or_unchanged("b_submitted_at", INTENT.c.submitted_at, UTCDateTime()),
        provider_message_id=_or_unchanged(
            "b_submitted_provider_id", INTENT.c.provider_message_id, String()
        ),
    )
)
RECORD_ATTEMPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.id == bindparam("b_attempt_id"))
    .values(
        stage=bindparam("b_stage"),
        finished_at=_when("b_now"),
        outcome=bindparam("b_outcome"),
        reply_code=bindparam("b_reply_code"),
        enhanced_status=bindparam("b_enhanced_status"),
        reply_text=bindparam("b_reply_text"),
        error=bindparam("b_error"),
        provider_message_id=bindparam("b_provider_message_id"),
        duration_ms=bindparam("b_duration_ms"),
    )
)
# PostgreSQL: T2 as one statement, so it is atomic even on an autocommit connection.
MOVED = MOVE_LEASED_INTENT.returning(INTENT.c.id).cte("moved")
RECORD_IF_MOVED = (
    RECORD_ATTEMPT.where(exists(select(MOVED.c.id))).add_cte(MOVED).returning(ATTEMPT.c.id)
)
FINISH_SILENT_ATTEMPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.id == bindparam("b_id"), ATTEMPT.c.finished_at.is_(None))
    .values(finished_at=_when("b_now"))
    .returning(ATTEMPT.c.stage)
)
JUDGE_SILENT_ATTEMPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.id == bindparam("b_id"))
    .values(outcome=bindparam("b_outcome"), error=bindparam("b_error"))
)
RELEASE_INTENT = (
    update(INTENT)
    .where(*HELD_BY_THIS_LEASE)
    .values(
        status=PENDING,
        lease_token=None,
        lease_expires_at=None,
        attempt_count=INTENT.c.attempt_count - 1,
        next_attempt_at=_when("b_due_at"),
        updated_at=_when("b_now"),
    )
)
DELETE_ATTEMPT = delete(ATTEMPT).where(ATTEMPT.c.id == bindparam("b_id"))


@dataclasses.dataclass(frozen=True)
class DueIntent:
    """The columns of an intent that claiming and sending need."""

    id: int
    message_id: str
    idempotency_key: str
    recipient: str
    template: str
    template_version: int
    params: dict[str, Any] | None
    lane: str
    purpose: str | None
    event: str | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    attempt_count: int  # attempts before this claim
    next_attempt_at: dt.datetime
    attempts_granted: int | None  # a requeue's grant: retried up to this attempt count

    @classmethod
    def from_row(cls, row: Any) -> DueIntent:
        return cls(*row[: len(DUE_COLUMNS)])


@dataclasses.dataclass(frozen=True)
class SqlKit:
    """What each database spells its own way on the send path. Its engine holds one
    (``Engine.sql``) and hands it to the store functions whose statements differ."""

    insert: Callable[..., Any]  # the INSERT construct that takes ON CONFLICT
    least: str  # the scalar function of the smallest of its arguments
    greatest: str  # and of the largest


def clip(text: str | None, limit: int) -> str | None:
    """Cut `text` to `limit` characters (None and "" stay as they are)."""
    return text[:limit] if text else text
