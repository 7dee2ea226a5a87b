"""The one statement that stores a new intent: idempotent, suppression-aware, waking workers.

``INSERT ... SELECT ... ON CONFLICT (idempotency_key) DO NOTHING RETURNING`` decides
the status from the suppression list inside the same statement, so an enqueue is
one round trip. On PostgreSQL the statement also calls ``pg_notify``: the
notification is delivered only when the business transaction commits.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import bindparam, case, exists, func, literal, null, select, true
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.sql import Executable

from console.models import Intent, Suppression
from console.store.suppression_lookup import recipient_forms
from console.vocabulary import PENDING, SUPPRESSED

NOTIFY_CHANNEL = "console_outbox"  # PostgreSQL LISTEN/NOTIFY channel of due mail
SUPPRESSED_REASON = "recipient is on the suppression list"
# Columns the caller supplies; status and status_reason are decided by the statement.
INSERTED_COLUMNS = (
    "idempotency_key", "message_id", "event", "recipient", "template", "template_version",
    "params", "lane", "purpose", "locale", "attempt_count", "next_attempt_at", "created_at",
    "updated_at", "expires_at", "recipient_account",
)  # fmt: skip


@functools.cache
def _statement(dialect: str) -> Executable:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    table = Intent.__table__
    forms = [bindparam("recipient_lower"), bindparam("recipient_hash")]  # hash: a forgotten one
    suppressed = exists().where(Suppression.recipient.in_(forms))
    values = [bindparam(name, type_=table.c[name].type) for name in INSERTED_COLUMNS]
    status = case((suppressed, literal(SUPPRESSED)), else_=literal(PENDING))
    reason = case((suppressed, literal(SUPPRESSED_REASON)), else_=null())
    source = select(*values, status, reason).where(true())  # WHERE: SQLite's ON CONFLICT parse
    inserted = (
        insert(table)
        .from_select([*INSERTED_COLUMNS, "status", "status_reason"], source)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
        .returning(table.c.id, table.c.status, table.c.status_reason)
    )
    if dialect != "postgresql":
        return inserted
    rows = inserted.cte("inserted")
    return select(
        rows.c.id, rows.c.status, rows.c.status_reason, func.pg_notify(NOTIFY_CHANNEL, "")
    )


def insert_intent_once(session: Session, values: dict[str, Any]) -> Intent | None:
    """Insert the intent unless its key exists; return it, or None when the key was taken.

    A concurrent transaction inserting the same key makes this statement wait for
    it; if that one commits, nothing is inserted and None is returned.
    """
    statement = _statement(session.get_bind().dialect.name)
    forms = recipient_forms(values["recipient"])
    parameters = {**values, "recipient_lower": forms[0], "recipient_hash": forms[-1]}
    row = session.execute(statement, parameters).first()
    if row is None:
        return None
    intent = Intent(**_all_columns(values), id=row.id, status=row.status,
                    status_reason=row.status_reason)  # fmt: skip
    make_transient_to_detached(intent)
    session.add(intent)  # persistent without another statement: every column is known
    return intent


def _all_columns(values: dict[str, Any]) -> dict[str, Any]:
    """Every column of the new row: the given values, the rest NULL as inserted."""
    names = (column.key for column in Intent.__table__.columns)
    return {name: values.get(name) for name in names if name not in ("id", "status",
            "status_reason")}  # fmt: skip
