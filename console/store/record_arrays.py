"""PostgreSQL: the T2 records of several attempts in one statement, their values as arrays.

Each record is still the compare-and-set of its own lease (``HELD_BY_THIS_LEASE``, row
by row): an intent this worker no longer holds is left as it is and its attempt is not
finished, exactly as ``attempt_records.record_outcome`` leaves it. The statement is
atomic, so the records it carries are committed together, in one round trip and one
commit instead of one each: next to the database, the round trip and the statement's
own overhead cost the event loop more than the rows' writes (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    bindparam,
    func,
    null,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from console.store import prepared as p
from console.store import send_statements as s
from console.store.columns import UTCDateTime
from console.vocabulary import SENDING

# Each record's values (attempt_records.record_values' keys) and their array types.
COLUMNS = (
    ("b_id", BigInteger),
    ("b_token", String),
    ("b_status", String),
    ("b_reason", String),
    ("b_now", UTCDateTime),
    ("b_next_attempt_at", UTCDateTime),
    ("b_submitted_at", UTCDateTime),
    ("b_submitted_provider_id", String),
    ("b_attempt_id", BigInteger),
    ("b_stage", String),
    ("b_outcome", String),
    ("b_reply_code", Integer),
    ("b_enhanced_status", String),
    ("b_reply_text", String),
    ("b_error", String),
    ("b_provider_message_id", String),
    ("b_duration_ms", Integer),
)


def _rows():
    arrays = [bindparam(name, type_=ARRAY(item_type())) for name, item_type in COLUMNS]
    table = func.unnest(*arrays).table_valued(*(name for name, _ in COLUMNS)).render_derived()
    return select(table).cte("records")


_ROWS = _rows()
_R = _ROWS.c
_MOVED = (
    update(s.INTENT)
    .where(
        s.INTENT.c.id == _R.b_id,
        s.INTENT.c.status.is_not_distinct_from(SENDING),
        s.INTENT.c.lease_token.is_not_distinct_from(_R.b_token),
    )
    .values(
        status=_R.b_status,
        status_reason=_R.b_reason,
        lease_token=null(),
        lease_expires_at=null(),
        updated_at=_R.b_now,
        next_attempt_at=func.coalesce(_R.b_next_attempt_at, s.INTENT.c.next_attempt_at),
        submitted_at=func.coalesce(_R.b_submitted_at, s.INTENT.c.submitted_at),
        provider_message_id=func.coalesce(
            _R.b_submitted_provider_id, s.INTENT.c.provider_message_id
        ),
    )
    .returning(s.INTENT.c.id)
    .cte("moved")
)
RECORD_BATCH_IF_MOVED = (
    update(s.ATTEMPT)
    .where(s.ATTEMPT.c.id == _R.b_attempt_id, _R.b_id.in_(select(_MOVED.c.id)))
    .values(
        stage=_R.b_stage,
        finished_at=_R.b_now,
        outcome=_R.b_outcome,
        reply_code=_R.b_reply_code,
        enhanced_status=_R.b_enhanced_status,
        reply_text=_R.b_reply_text,
        error=_R.b_error,
        provider_message_id=_R.b_provider_message_id,
        duration_ms=_R.b_duration_ms,
    )
    .add_cte(_MOVED)
    .returning(s.ATTEMPT.c.id)
)


def record_all(connection: Connection, records: Sequence[dict[str, Any]]) -> set[int]:
    """Record each of `records` (``attempt_records.record_values``) whose lease still
    holds, in one statement on an autocommit connection; the attempt ids recorded."""
    arrays = {name: [record[name] for record in records] for name, _ in COLUMNS}
    cursor = p.prepared(RECORD_BATCH_IF_MOVED, connection.dialect).execute(connection, arrays)
    recorded = {attempt_id for (attempt_id,) in cursor.fetchall()}
    p.commit(connection)  # nothing to commit on an autocommit connection: the driver's no-op
    return recorded
