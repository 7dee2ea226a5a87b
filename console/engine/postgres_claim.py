"""The claim's steps on PostgreSQL, inside a transaction of the engine.

Due rows are locked with ``FOR UPDATE SKIP LOCKED``, lane by lane and each lane's retries
first, so workers on other machines skip what this one holds rather than wait for it. A
batch is leased in one statement whose values travel as arrays (``unnest``): the
intents leased in a data-modifying ``WITH``, an attempt added for each, each attempt's id
returned with its lease token.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from sqlalchemy import BigInteger, Integer, String, bindparam, func, insert, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from console.model_columns import UTCDateTime
from console.store import claims
from console.store import statements as s
from console.store.claims import FIRST_TRY, RETRY, Claim
from console.store.statements import DueIntent, SqlKit
from console.vocabulary import CLAIMED, LANES, SENDING

LOCK_DUE = {
    (lane, kind): claims.due_of_kind(lane, kind)
    .limit(claims.lane_limit(lane))
    .with_for_update(skip_locked=True)
    for lane in LANES
    for kind in (RETRY, FIRST_TRY)
}


# PostgreSQL's own INSERT takes ON CONFLICT; LEAST and GREATEST compare their arguments
SQL = SqlKit(insert=postgresql.insert, least="LEAST", greatest="GREATEST")


def _array(name: str, item_type):
    return bindparam(name, type_=ARRAY(item_type))  # psycopg's dialect casts it


def _leased_batch():
    """The batch as rows: (intent_id, lease_token, attempt_number)."""
    arrays = _array("b_ids", BigInteger), _array("b_tokens", String), _array("b_numbers", Integer)
    columns = "intent_id", "lease_token", "attempt_number"
    return func.unnest(*arrays).table_valued(*columns).render_derived()


_LEASED = _leased_batch()
_LEASE_INTENTS = (
    update(s.INTENT)
    .where(s.INTENT.c.id == _LEASED.c.intent_id)
    .values(
        status=SENDING,
        lease_token=_LEASED.c.lease_token,
        lease_expires_at=bindparam("b_lease_expires_at", type_=UTCDateTime()),
        attempt_count=_LEASED.c.attempt_number,
        updated_at=bindparam("b_now", type_=UTCDateTime()),
    )
    .returning(s.INTENT.c.id, s.INTENT.c.attempt_count, s.INTENT.c.lease_token)
    .cte("leased")
)
LEASE_BATCH = (
    insert(s.ATTEMPT)
    .from_select(
        ["intent_id", "attempt_number", "lease_token", "worker_id", "stage", "started_at"],
        select(
            _LEASE_INTENTS.c.id,
            _LEASE_INTENTS.c.attempt_count,
            _LEASE_INTENTS.c.lease_token,
            bindparam("b_worker_id", type_=String()),
            bindparam("b_stage", type_=String()),
            bindparam("b_now", type_=UTCDateTime()),
        ),
    )
    .add_cte(_LEASE_INTENTS)
    .returning(s.ATTEMPT.c.lease_token, s.ATTEMPT.c.id)
)


class PostgresClaim:
    """The claim's steps whose SQL is PostgreSQL's."""

    sql = SQL

    def lock_due(
        self, session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        connection = session.connection()
        due: list[DueIntent] = []
        for lane in LANES:
            in_lane = 0
            for kind in (RETRY, FIRST_TRY):
                remaining = min(limit - len(due), limits[lane] - in_lane)
                if remaining <= 0:
                    break
                values = {"b_now": now, f"b_limit_{lane}": remaining}
                rows = connection.execute(LOCK_DUE[(lane, kind)], values)
                locked = [DueIntent.from_row(row) for row in rows]
                due += locked
                in_lane += len(locked)
        return due

    def lease(
        self,
        session: Session,
        due: Sequence[DueIntent],
        now: dt.datetime,
        lease_expires_at: dt.datetime,
        worker_id: str,
    ) -> list[Claim]:
        if not due:
            return []
        tokens = claims.lease_tokens(len(due))
        values = dict(
            b_ids=[intent.id for intent in due],
            b_tokens=tokens,
            b_numbers=[intent.attempt_count + 1 for intent in due],
            b_now=now,
            b_lease_expires_at=lease_expires_at,
            b_worker_id=worker_id,
            b_stage=CLAIMED,
        )
        inserted = session.connection().execute(LEASE_BATCH, values)
        attempt_ids = {token: attempt_id for token, attempt_id in inserted}
        return claims.claims_of(due, tokens, attempt_ids, lease_expires_at)
