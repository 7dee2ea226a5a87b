"""Every query of the send loop (DESIGN §4), in the order a tick runs them.

- ``beat``: the worker's heartbeat row, in one transaction with the sweep;
- ``sweep_expired_leases``: intents whose worker went silent;
- ``claim_due`` (T1): lock a bounded batch of due intents, critical lane first,
  recheck them, lease the rest and insert one attempt each;
- ``mark_data_sent``: commit "the body may leave now" before it does;
- ``record_outcome`` (T2): compare-and-set on the lease token;
- ``release``: give back claimed intents that were never handed to the transport.

PostgreSQL locks the batch with ``FOR UPDATE SKIP LOCKED``; SQLite has a single
writer, and claims with one ``UPDATE ... RETURNING`` that marks the rows
``sending`` before anyone else can see them ``pending``. Every later write is
guarded by the lease token (intents) or ``finished_at IS NULL`` (attempts), so
concurrent workers and sweeps cannot both win.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    String,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from console.core.classify import Classification, enhanced_status_of
from console.core.lifecycle import Decision
from console.core.send_result import SendResult
from console.models import Attempt, Intent, Suppression, UTCDateTime, WorkerHeartbeat
from console.vocabulary import CLAIMED, DATA_SENT, LANES, PENDING, SENDING, SUBMITTED

REPLY_TEXT_LIMIT = 2000
ERROR_TEXT_LIMIT = 1000
SWEEP_BATCH_SIZE = 200

_DUE_COLUMNS = tuple(
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
    )
)


# The per-message statements are built once; each execution only binds values.
_INTENT = Intent.__table__
_ATTEMPT = Attempt.__table__


def _when(name: str):
    return bindparam(name, type_=UTCDateTime())


def _or_unchanged(name: str, column, type_):
    """SET column = :name, or leave it as it is when the value bound is NULL."""
    return func.coalesce(bindparam(name, type_=type_), column)


_LEASE_INTENT = (
    update(_INTENT)
    .where(_INTENT.c.id == bindparam("b_id"))
    .values(
        status=SENDING,
        lease_token=bindparam("b_token"),
        lease_expires_at=_when("b_lease_expires_at"),
        attempt_count=bindparam("b_attempt_count"),
        updated_at=_when("b_now"),
    )
)
# An intent leaving `sending`: its new status and reason, the lease dropped.
_LEASE_RELEASED = dict(
    status=bindparam("b_status"),
    status_reason=bindparam("b_reason"),
    lease_token=None,
    lease_expires_at=None,
    updated_at=_when("b_now"),
    next_attempt_at=_or_unchanged("b_next_attempt_at", _INTENT.c.next_attempt_at, UTCDateTime()),
)
_CLOSE_UNSENT = update(_INTENT).where(_INTENT.c.id == bindparam("b_id")).values(**_LEASE_RELEASED)
# Rows come back in any order; each attempt's lease token is unique and maps them.
_INSERT_ATTEMPTS = insert(_ATTEMPT).returning(_ATTEMPT.c.lease_token, _ATTEMPT.c.id)
_MARK_DATA_SENT = (
    update(_ATTEMPT)
    .where(_ATTEMPT.c.id == bindparam("b_id"), _ATTEMPT.c.finished_at.is_(None))
    .values(stage=DATA_SENT)
)
# Compare-and-set: only the holder of the current lease token moves a `sending` intent.
_MOVE_LEASED_INTENT = (
    update(_INTENT)
    .where(
        _INTENT.c.id == bindparam("b_id"),
        _INTENT.c.status == SENDING,
        _INTENT.c.lease_token == bindparam("b_token"),
    )
    .values(
        **_LEASE_RELEASED,
        submitted_at=_or_unchanged("b_submitted_at", _INTENT.c.submitted_at, UTCDateTime()),
        provider_message_id=_or_unchanged(
            "b_submitted_provider_id", _INTENT.c.provider_message_id, String()
        ),
    )
)
_RECORD_ATTEMPT = (
    update(_ATTEMPT)
    .where(_ATTEMPT.c.id == bindparam("b_attempt_id"))
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
_MOVED = _MOVE_LEASED_INTENT.returning(_INTENT.c.id).cte("moved")
_RECORD_IF_MOVED = (
    _RECORD_ATTEMPT.where(exists(select(_MOVED.c.id))).add_cte(_MOVED).returning(_ATTEMPT.c.id)
)
_FINISH_SILENT_ATTEMPT = (
    update(_ATTEMPT)
    .where(_ATTEMPT.c.id == bindparam("b_id"), _ATTEMPT.c.finished_at.is_(None))
    .values(finished_at=_when("b_now"))
    .returning(_ATTEMPT.c.stage)
)
_JUDGE_SILENT_ATTEMPT = (
    update(_ATTEMPT)
    .where(_ATTEMPT.c.id == bindparam("b_id"))
    .values(outcome=bindparam("b_outcome"), error=bindparam("b_error"))
)
_RELEASE_INTENT = (
    update(_INTENT)
    .where(
        _INTENT.c.id == bindparam("b_id"),
        _INTENT.c.status == SENDING,
        _INTENT.c.lease_token == bindparam("b_token"),
    )
    .values(
        status=PENDING,
        lease_token=None,
        lease_expires_at=None,
        attempt_count=_INTENT.c.attempt_count - 1,
        next_attempt_at=_when("b_now"),
        updated_at=_when("b_now"),
    )
)
_DELETE_ATTEMPT = delete(_ATTEMPT).where(_ATTEMPT.c.id == bindparam("b_id"))


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

    @classmethod
    def from_row(cls, row: Any) -> DueIntent:
        return cls(*row[: len(_DUE_COLUMNS)])


@dataclasses.dataclass(frozen=True)
class Claim:
    """An intent leased to this worker, and the attempt row recording the try."""

    intent: DueIntent
    attempt_id: int
    attempt_number: int  # the intent's attempt_count including this attempt
    lease_token: str
    lease_expires_at: dt.datetime


@dataclasses.dataclass
class ClaimBatch:
    claims: list[Claim]
    not_sent: list[tuple[DueIntent, Decision]]  # expired, suppressed, cancelled or deferred


@dataclasses.dataclass(frozen=True)
class ExpiredLease:
    """An intent still ``sending`` after its lease ran out, and how far its attempt got."""

    intent: DueIntent
    lease_token: str
    attempt_id: int | None
    stage: str


# (intent, recipient suppressed?, session) -> None to send it, else where it goes instead
Screen = Callable[[DueIntent, bool, Session], Decision | None]
JudgeExpiredLease = Callable[[ExpiredLease], tuple[Classification, Decision]]


def beat(
    session: Session,
    *,
    worker_id: str,
    host: str,
    pid: int,
    started_at: dt.datetime,
    now: dt.datetime,
) -> None:
    """Insert or refresh this worker's heartbeat row (the caller commits)."""
    insert_for = _dialect_insert(session)
    statement = insert_for(WorkerHeartbeat).values(
        worker_id=worker_id, host=host, pid=pid, started_at=started_at, last_tick_at=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=["worker_id"], set_={"last_tick_at": statement.excluded.last_tick_at}
    )
    session.execute(statement)


def claim_due(
    session: Session,
    *,
    now: dt.datetime,
    limit: int,
    lease_seconds: float,
    worker_id: str,
    screen: Screen,
    lane_limits: Mapping[str, int] | None = None,
) -> ClaimBatch:
    """T1: lease up to `limit` due intents (critical lane first), and commit.

    Each locked intent is first offered to `screen` (expiry, suppression,
    eligibility); those it returns a decision for are closed with it instead.
    `lane_limits` caps a lane (0 while its circuit breaker pauses it).
    """
    limits = {lane: min(limit, (lane_limits or {}).get(lane, limit)) for lane in LANES}
    due = _lock_due(session, now, limit, limits)
    if not due:
        session.commit()
        return ClaimBatch([], [])
    suppressed = _suppressed_among(session, {intent.recipient.lower() for intent in due})
    to_send: list[DueIntent] = []
    not_sent: list[tuple[DueIntent, Decision]] = []
    for intent in due:
        decision = screen(intent, intent.recipient.lower() in suppressed, session)
        if decision is None:
            to_send.append(intent)
        else:
            not_sent.append((intent, decision))
    _close(session, not_sent, now)
    claims = _lease(session, to_send, now, now + dt.timedelta(seconds=lease_seconds), worker_id)
    session.commit()
    return ClaimBatch(claims, not_sent)


def _lock_due(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[DueIntent]:
    if session.get_bind().dialect.name == "postgresql":
        return _lock_due_skip_locked(session, now, limit, limits)
    return _mark_due_sending(session, now, limit, limits)


def _due_in_lane(lane: str, now: dt.datetime):
    intent = _INTENT.c
    return (
        select(*_DUE_COLUMNS)
        .where(intent.status == PENDING, intent.lane == lane, intent.next_attempt_at <= now)
        .order_by(intent.next_attempt_at)
    )


def _lock_due_skip_locked(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[DueIntent]:
    """PostgreSQL: lock due rows lane by lane, skipping rows other workers hold."""
    connection = session.connection()
    due: list[DueIntent] = []
    for lane in LANES:
        remaining = min(limit - len(due), limits[lane])
        if remaining <= 0:
            continue
        query = _due_in_lane(lane, now).limit(remaining).with_for_update(skip_locked=True)
        due += [DueIntent.from_row(row) for row in connection.execute(query)]
    return due


def _mark_due_sending(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[DueIntent]:
    """SQLite: one UPDATE ... RETURNING takes the write lock and the batch at once."""
    per_lane = []
    for rank, lane in enumerate(LANES):
        lane_due = _due_in_lane(lane, now).with_only_columns(
            _INTENT.c.id, _INTENT.c.next_attempt_at
        )
        lane_due = lane_due.limit(limits[lane]).subquery()
        per_lane.append(
            select(lane_due.c.id, literal(rank).label("lane_rank"), lane_due.c.next_attempt_at)
        )
    ranked = union_all(*per_lane).subquery()
    chosen = select(ranked.c.id).order_by(ranked.c.lane_rank, ranked.c.next_attempt_at).limit(limit)
    statement = (
        update(_INTENT)
        .where(_INTENT.c.id.in_(chosen), _INTENT.c.status == PENDING)
        .values(status=SENDING, updated_at=now)
        .returning(*_DUE_COLUMNS)
    )
    due = [DueIntent.from_row(row) for row in session.connection().execute(statement)]
    lane_rank = {lane: rank for rank, lane in enumerate(LANES)}
    return sorted(due, key=lambda intent: (lane_rank[intent.lane], intent.next_attempt_at))


def _suppressed_among(session: Session, recipients: set[str]) -> set[str]:
    table = Suppression.__table__
    query = select(table.c.recipient).where(table.c.recipient.in_(recipients))
    return set(session.connection().execute(query).scalars())


def _close(session: Session, not_sent: list[tuple[DueIntent, Decision]], now: dt.datetime) -> None:
    """Move intents that must not be sent now to their decided status (no attempt)."""
    if not_sent:
        session.connection().execute(
            _CLOSE_UNSENT,
            [
                dict(
                    b_id=intent.id,
                    b_status=decision.status,
                    b_reason=decision.reason,
                    b_now=now,
                    b_next_attempt_at=decision.next_attempt_at,
                )
                for intent, decision in not_sent
            ],
        )


def _lease(
    session: Session,
    due: Sequence[DueIntent],
    now: dt.datetime,
    lease_expires_at: dt.datetime,
    worker_id: str,
) -> list[Claim]:
    """Give each intent a fresh lease token and one new attempt row."""
    if not due:
        return []
    connection = session.connection()
    tokens = [secrets.token_hex(16) for _ in due]
    connection.execute(
        _LEASE_INTENT,
        [
            dict(
                b_id=intent.id,
                b_token=token,
                b_lease_expires_at=lease_expires_at,
                b_attempt_count=intent.attempt_count + 1,
                b_now=now,
            )
            for intent, token in zip(due, tokens, strict=True)
        ],
    )
    inserted = connection.execute(
        _INSERT_ATTEMPTS,
        [
            dict(
                intent_id=intent.id,
                attempt_number=intent.attempt_count + 1,
                lease_token=token,
                worker_id=worker_id,
                stage=CLAIMED,
                started_at=now,
            )
            for intent, token in zip(due, tokens, strict=True)
        ],
    )
    attempt_ids = {token: attempt_id for token, attempt_id in inserted}
    return [
        Claim(intent, attempt_ids[token], intent.attempt_count + 1, token, lease_expires_at)
        for intent, token in zip(due, tokens, strict=True)
    ]


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
    marked = connection.execute(_MARK_DATA_SENT, {"b_id": attempt_id}).rowcount == 1
    connection.commit()
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
    submitted = decision.status == SUBMITTED
    values = dict(
        b_id=claim.intent.id,
        b_token=claim.lease_token,
        b_status=decision.status,
        b_reason=_clip(decision.reason, ERROR_TEXT_LIMIT),
        b_now=now,
        b_next_attempt_at=decision.next_attempt_at,
        b_submitted_at=now if submitted else None,
        b_submitted_provider_id=result.provider_message_id if submitted else None,
        b_attempt_id=claim.attempt_id,
        b_stage=result.stage,
        b_outcome=classification.outcome,
        b_reply_code=result.code,
        b_enhanced_status=_enhanced_status(result),
        b_reply_text=_clip(result.reply_text, REPLY_TEXT_LIMIT),
        b_error=_clip(result.error, ERROR_TEXT_LIMIT),
        b_provider_message_id=result.provider_message_id,
        b_duration_ms=result.duration_ms,
    )
    if connection.dialect.name == "postgresql":
        recorded = connection.execute(_RECORD_IF_MOVED, values).first() is not None
    else:
        recorded = connection.execute(_MOVE_LEASED_INTENT, values).rowcount == 1
        if recorded:
            connection.execute(_RECORD_ATTEMPT, values)
    if recorded:
        connection.commit()
    else:
        connection.rollback()
    return recorded


def _enhanced_status(result: SendResult) -> str | None:
    if result.protocol != "smtp":
        return result.enhanced_status
    return result.enhanced_status or enhanced_status_of(result.reply_text)


def sweep_expired_leases(
    session: Session, *, now: dt.datetime, judge: JudgeExpiredLease
) -> list[tuple[ExpiredLease, Decision]]:
    """Close the attempts of silent workers and move their intents as `judge` decides.

    The caller commits.
    """
    query = (
        select(*_DUE_COLUMNS, Intent.lease_token, Attempt.id)
        .outerjoin(
            Attempt,
            (Attempt.intent_id == Intent.id) & (Attempt.lease_token == Intent.lease_token),
        )
        .where(Intent.status == SENDING, Intent.lease_expires_at < now)
        .limit(SWEEP_BATCH_SIZE)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=Intent)
    swept = []
    for row in session.execute(query).all():
        lease = _close_silent_attempt(session, row, now)
        if lease is None:
            continue
        classification, decision = judge(lease)
        if _settle_expired_lease(session, lease, classification, decision, now):
            swept.append((lease, decision))
    return swept


def _close_silent_attempt(session: Session, row: Any, now: dt.datetime) -> ExpiredLease | None:
    """Finish the attempt first: from then on its worker can no longer mark DATA_SENT."""
    intent, lease_token, attempt_id = DueIntent.from_row(row), row[-2], row[-1]
    if attempt_id is None:
        return ExpiredLease(intent, lease_token, None, CLAIMED)
    finished = session.connection().execute(
        _FINISH_SILENT_ATTEMPT, {"b_id": attempt_id, "b_now": now}
    )
    stage = finished.scalar_one_or_none()
    if stage is None:
        return None
    return ExpiredLease(intent, lease_token, attempt_id, stage)


def _settle_expired_lease(
    session: Session,
    lease: ExpiredLease,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> bool:
    connection = session.connection()
    moved = connection.execute(
        _MOVE_LEASED_INTENT,
        dict(
            b_id=lease.intent.id,
            b_token=lease.lease_token,
            b_status=decision.status,
            b_reason=_clip(decision.reason, ERROR_TEXT_LIMIT),
            b_now=now,
            b_next_attempt_at=decision.next_attempt_at,
            b_submitted_at=None,
            b_submitted_provider_id=None,
        ),
    )
    if moved.rowcount != 1:
        return False
    if lease.attempt_id is not None:
        connection.execute(
            _JUDGE_SILENT_ATTEMPT,
            dict(
                b_id=lease.attempt_id,
                b_outcome=classification.outcome,
                b_error=_clip(classification.reason, ERROR_TEXT_LIMIT),
            ),
        )
    return True


def release(session: Session, claims: Sequence[Claim], now: dt.datetime) -> int:
    """Give back claims that never reached the transport: pending again, attempt removed."""
    connection = session.connection()
    released = 0
    for claim in claims:
        moved = connection.execute(
            _RELEASE_INTENT, dict(b_id=claim.intent.id, b_token=claim.lease_token, b_now=now)
        )
        if moved.rowcount == 1:
            connection.execute(_DELETE_ATTEMPT, {"b_id": claim.attempt_id})
            released += 1
    session.commit()
    return released


def _dialect_insert(session: Session):
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    return dialect_insert


def _clip(text: str | None, limit: int) -> str | None:
    return text[:limit] if text else text
