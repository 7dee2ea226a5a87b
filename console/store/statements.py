"""The SQL the queries share: dialect helpers, the send loop's statements and their prepared form.

The helpers (the dialect, index-friendly prefixes, pages) serve every query. The send
loop's statements and the columns of a due intent are built once here (each execution only
binds values), and ``Prepared`` runs the per-message ones on the driver's cursor.
``SqlKit`` is what each database spells its own way; each engine holds one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    String,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, InvalidRequestError
from sqlalchemy.orm import Session
from sqlalchemy.sql import ClauseElement, TextClause

from console.model_columns import UTCDateTime
from console.models import Attempt, Intent, Suppression
from console.vocabulary import DATA_SENT, PENDING, SENDING

# Helpers -----------------------------------------------------------------------------------------
#
# Small SQL helpers the console's queries share: the dialect, index-friendly prefixes, pages.

PAGE_SIZE = 50


def dialect_of(session: Session) -> str:
    """The name of the database dialect `session` talks to: "sqlite" or "postgresql"."""
    return session.get_bind().dialect.name


def insert_on_conflict(
    table: Any, columns: Sequence[str], conflict: str, then: str = "NOTHING", returning: str = ""
) -> TextClause:
    """``INSERT INTO table (columns) VALUES (:columns) ON CONFLICT (conflict) DO then``:
    SQLite and PostgreSQL spell it alike, so one statement serves both. Each value is bound
    with its column's type; `returning`, when given, names what the row gives back."""
    names = ", ".join(columns)
    values = ", ".join(f":{column}" for column in columns)
    sql = (
        f"INSERT INTO {table.name} ({names}) VALUES ({values}) "
        f"ON CONFLICT ({conflict}) DO {then}" + (f" RETURNING {returning}" if returning else "")
    )
    return text(sql).bindparams(*(bindparam(c, type_=table.c[c].type) for c in columns))


def insert_for(dialect: str) -> Any:
    """The INSERT construct of `dialect` (postgresql or sqlite): both have ON CONFLICT."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def prefix_match(column: Any, prefix: str, dialect: str) -> ColumnElement[bool]:
    """Match values starting with `prefix` in a way that uses the column's index.

    PostgreSQL's indexes use varchar_pattern_ops, which serve LIKE 'x%'; SQLite's
    LIKE ignores case and skips the index, so there it is a range on the BINARY index.
    """
    if dialect == "postgresql":
        return column.startswith(prefix, autoescape=True)
    if ord(prefix[-1]) >= 0x10FFFF:
        return and_(column >= prefix, func.substr(column, 1, len(prefix)) == prefix)
    following = ord(prefix[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates cannot be stored: the next character is U+E000
        following = 0xE000
    upper = prefix[:-1] + chr(following)
    return and_(column >= prefix, column < upper)


# The send loop's statements ----------------------------------------------------------------------
#
# The statements of the send loop, built once (each execution only binds values), and the columns
# of a due intent. Used by the claim, the lease sweep and the records.

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


# Prepared statements -----------------------------------------------------------------------------
#
# The send loop's per-message statements, compiled once and run on the driver's cursor.
#
# The ``data_sent`` mark and the compare-and-set record run once a message each.
# ``Connection.execute`` spends longer looking the statement up in its compiled cache, building the
# parameters and wrapping the result than SQLite's own work for these statements
# (docs/benchmarks.md). A ``Prepared`` keeps SQLAlchemy's own compilation of the statement for the
# connection's dialect (its SQL and its bind processors, so each value is converted exactly as
# ``Connection.execute`` converts it) and runs it on the DBAPI cursor of the SQLAlchemy connection.
#
# It commits on the DBAPI connection too, so it is used only on a connection with no
# transaction of SQLAlchemy's own begun (the SQLite engine's writer). A driver error is raised
# as SQLAlchemy's ``DBAPIError`` without its parameters, as the engines raise it, and a broken
# connection is invalidated so that the pool does not hand it out again.

_MISSING = object()


class Prepared:
    """A Core statement compiled once for a dialect, run on the DBAPI cursor."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self._dialect = dialect
        self.sql = compiled.string
        if any(bind.callable for bind in compiled.bind_names) or compiled.escaped_bind_names:
            raise ValueError(f"not a statement Prepared can run: {self.sql}")
        # each driver parameter: its name, where its value comes from, its processor
        # (what construct_params and the bind processors do, planned once); a
        # positional style lists a value bound twice twice
        steps = {
            name: (name, bind.key, bind.required, bind.value, _processor(bind, dialect))
            for bind, name in compiled.bind_names.items()
        }
        self._positions = compiled.positiontup  # None for a named paramstyle
        names = steps if self._positions is None else self._positions
        self._plan = [steps[name] for name in names]

    def parameters(self, values: dict[str, Any]) -> list[Any] | dict[str, Any]:
        """The driver's parameters for `values`, converted as SQLAlchemy converts them."""
        converted = []
        for _name, key, required, fixed, process in self._plan:
            value = values.get(key, _MISSING)
            if value is _MISSING:
                if required:
                    raise InvalidRequestError(f"A value is required for bind parameter {key!r}")
                value = fixed
            converted.append(value if process is None else process(value))
        if self._positions is None:
            return {step[0]: value for step, value in zip(self._plan, converted, strict=True)}
        return converted

    def execute(self, connection: Connection, values: dict[str, Any]) -> Any:
        """Run the statement with `values` on `connection`'s DBAPI cursor; the cursor."""
        dbapi_connection = connection.connection.dbapi_connection
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(self.sql, self.parameters(values))
        except self._dialect.loaded_dbapi.Error as error:
            raise self._wrapped(connection, error, dbapi_connection, cursor) from error
        return cursor

    def _wrapped(self, connection: Connection, error, dbapi_connection, cursor) -> DBAPIError:
        if self._dialect.is_disconnect(error, dbapi_connection, cursor):
            connection.invalidate(error)
        return DBAPIError.instance(
            self.sql,
            None,
            error,
            self._dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=self._dialect,
        )


def _processor(bind, dialect: Dialect):
    return bind.type.dialect_impl(dialect).bind_processor(dialect)


# Each entry holds its statement too: a statement that lived in the cache cannot be
# collected and its id handed to another one (a statement built on the fly).
_prepared: dict[tuple[int, str, str, str], tuple[ClauseElement, Prepared]] = {}


def prepared(statement: ClauseElement, dialect: Dialect) -> Prepared:
    """The `Prepared` of a module-level `statement` for dialects like `dialect`."""
    key = (id(statement), dialect.name, dialect.driver, dialect.paramstyle)
    found = _prepared.get(key)
    if found is None:
        found = _prepared[key] = (statement, Prepared(statement, dialect))
    return found[1]


def commit(connection: Connection) -> None:
    """Commit what `Prepared` statements did on `connection` (nothing in autocommit)."""
    connection.connection.dbapi_connection.commit()


def rollback(connection: Connection) -> None:
    """Roll back what `Prepared` statements did on `connection`."""
    connection.connection.dbapi_connection.rollback()
