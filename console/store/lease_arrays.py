"""PostgreSQL: lease a claimed batch in one statement whose values travel as arrays.

Leasing 50 intents row by row costs an ``UPDATE`` execution each and an ``INSERT``
with 300 placeholders whose text the driver parses anew every claim (too long for
its query cache). Here the batch's ids, tokens and counts are three arrays
``unnest`` turns back into rows: the same rows written, in one short statement
prepared once (the ``UPDATE`` in its ``WITH``, the ``INSERT`` of the attempts after).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from console.store import send_statements as s
from console.store.columns import UTCDateTime
from console.vocabulary import CLAIMED, SENDING


def _array(name: str, item_type):
    return bindparam(name, type_=ARRAY(item_type))  # psycopg's dialect casts it


def _batch():
    """The batch as rows: (intent_id, lease_token, attempt_number)."""
    arrays = _array("b_ids", BigInteger), _array("b_tokens", String), _array("b_numbers", Integer)
    columns = "intent_id", "lease_token", "attempt_number"
    return func.unnest(*arrays).table_valued(*columns).render_derived()


_LEASED = _batch()
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
# One statement: the intents leased in a data-modifying WITH, an attempt added for each
# row it leased, and each attempt's id returned with its lease token.
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


def lease(
    connection: Connection,
    due: Sequence[s.DueIntent],
    tokens: list[str],
    now: dt.datetime,
    lease_expires_at: dt.datetime,
    worker_id: str,
) -> dict[str, int]:
    """Lease each of `due` under its token and add its attempt; the attempt id of each token."""
    batch = dict(
        b_ids=[intent.id for intent in due],
        b_tokens=tokens,
        b_numbers=[intent.attempt_count + 1 for intent in due],
        b_now=now,
    )
    inserted = connection.execute(
        LEASE_BATCH,
        dict(batch, b_lease_expires_at=lease_expires_at, b_worker_id=worker_id, b_stage=CLAIMED),
    )
    return {token: attempt_id for token, attempt_id in inserted}
