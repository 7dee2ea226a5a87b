"""T1 of the send loop, the claim: lock due intents, close those not to send, lease the rest.

Every write that gives an intent a lease or takes it back: the claim that leases due intents
to a worker, and the sweep that takes back the leases of a worker that went silent. The
statements they run are built once in ``console.store.statements``; on PostgreSQL a batch is
leased in one statement whose values travel as arrays. Nothing here commits: the worker's
session does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    any_,
    bindparam,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.model_columns import UTCDateTime
from console.models import Attempt, Intent, Suppression
from console.state_tables import DomainDeferral
from console.store import holds, suppressions
from console.store import statements as s
from console.vocabulary import CLAIMED, CRITICAL, LANES, PENDING, SENDING

# The claim ---------------------------------------------------------------------------------------
#
# T1 of the send loop: lock due intents, close those not to send, lease the rest.
#
# The worker runs the steps in order and decides in between; nothing here commits (the worker's
# session does, once the batch is leased):
#
# - ``lock_due``: a bounded batch of due intents, critical lane first. PostgreSQL locks rows with
#   ``FOR UPDATE SKIP LOCKED``; SQLite has a single writer and claims with one ``UPDATE ...
#   RETURNING`` that marks the rows ``sending`` before anyone else can see them ``pending``;
# - ``suppressed_among``: which recipients of the batch are suppressed;
# - ``close_unsent``: expired, suppressed, cancelled or deferred intents, no attempt;
# - ``lease``: a fresh lease token and one ``attempt`` row each;
# - ``release``: give back claimed intents never handed to the transport.
#
# Every later write is guarded by the lease token (intents) or ``finished_at IS NULL`` (attempts),
# so concurrent workers and sweeps cannot both win.


@dataclasses.dataclass(frozen=True)
class Claim:
    """An intent leased to this worker, and the attempt row recording the try."""

    intent: s.DueIntent
    attempt_id: int
    attempt_number: int  # the intent's attempt_count including this attempt
    lease_token: str
    lease_expires_at: dt.datetime


def lane_limits_within(limit: int, lane_limits: Mapping[str, int] | None) -> dict[str, int]:
    """Each lane's cap for one claim: `limit`, lowered where `lane_limits` says (0 = paused)."""
    return {lane: min(limit, (lane_limits or {}).get(lane, limit)) for lane in LANES}


def lock_due(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[s.DueIntent]:
    """Lock up to `limit` due intents, at most `limits[lane]` from each lane, critical first."""
    if session.get_bind().dialect.name == "postgresql":
        return _lock_due_skip_locked(session, now, limit, limits)
    return _mark_due_sending(session, now, limit, limits)


# The claim's statements are built once; each claim binds `now` and the limits.
_NOW = bindparam("b_now", type_=UTCDateTime())


def _due_in_lane(lane: str):
    intent = s.INTENT.c
    return (
        select(*s.DUE_COLUMNS)
        .where(intent.status == PENDING, intent.lane == lane, intent.next_attempt_at <= _NOW)
        .where(~_in_deferred_domain(_NOW))
        .where(~holds.lane_held(lane, _NOW), ~holds.intent_held(_NOW))
    )


# Longest-waiting first: in each lane retries before first attempts, each kind by when it
# became due (`next_attempt_at`). Retries are read through their own partial index
# (``ix_email_intent_retry_due``), first attempts through ``ix_email_intent_claim``: no
# sort of the backlog. The retries' condition is written as the index's, in constants,
# so both databases choose that index. (An intent held back because its domain was
# deferred keeps its `next_attempt_at`: the claim skips a deferred domain until the
# deferral ends, then its oldest mail goes first.)
RETRY, FIRST_TRY = 0, 1
RETRY_DUE = (s.INTENT.c.status == literal_column(f"'{PENDING}'")) & (
    s.INTENT.c.attempt_count > literal_column("0")
)


def _due_of_kind(lane: str, kind: int):
    """The due intents of `lane` of one kind (RETRY, FIRST_TRY), oldest first."""
    intent = s.INTENT.c
    of_kind = RETRY_DUE if kind == RETRY else intent.attempt_count == literal_column("0")
    return _due_in_lane(lane).where(of_kind).order_by(intent.next_attempt_at, intent.id)


def waited_longest(intent: s.DueIntent) -> tuple:
    """The claim's order within a lane, for intents already read."""
    kind = RETRY if intent.attempt_count > 0 else FIRST_TRY
    return kind, intent.next_attempt_at, intent.id


def _in_deferred_domain(now):
    """The intent's recipient domain has a deferral that has not ended (DomainDeferral)."""
    deferral = DomainDeferral.__table__.c
    recipient = func.lower(s.INTENT.c.recipient)
    return exists().where(
        deferral.deferred_until > now, recipient.like(literal("%@") + deferral.domain)
    )


def _lane_limit(lane: str):
    return bindparam(f"b_limit_{lane}", type_=Integer())


# PostgreSQL: due rows of one lane and kind, locked, skipping rows other workers hold.
_LOCK_DUE = {
    (lane, kind): _due_of_kind(lane, kind)
    .limit(_lane_limit(lane))
    .with_for_update(skip_locked=True)
    for lane in LANES
    for kind in (RETRY, FIRST_TRY)
}


def _lock_due_skip_locked(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[s.DueIntent]:
    """PostgreSQL: lock due rows lane by lane, retries first, skipping rows others hold."""
    connection = session.connection()
    due: list[s.DueIntent] = []
    for lane in LANES:
        in_lane = 0
        for kind in (RETRY, FIRST_TRY):
            remaining = min(limit - len(due), limits[lane] - in_lane)
            if remaining <= 0:
                break
            values = {"b_now": now, f"b_limit_{lane}": remaining}
            rows = [
                s.DueIntent.from_row(row)
                for row in connection.execute(_LOCK_DUE[(lane, kind)], values)
            ]
            due += rows
            in_lane += len(rows)
    return due


_CRITICAL_DUE = select(exists(_due_in_lane(CRITICAL).with_only_columns(s.INTENT.c.id)))


def critical_due(connection: Connection, now: dt.datetime) -> bool:
    """Whether a critical intent is due at `now` (as a claim would find it)."""
    return bool(connection.execute(_CRITICAL_DUE, {"b_now": now}).scalar())


def _mark_due_sending_statement():
    """SQLite: one UPDATE ... RETURNING that takes the write lock and the batch at once."""
    per_lane = []
    for rank, lane in enumerate(LANES):
        kinds = []
        for kind in (RETRY, FIRST_TRY):
            chosen = _due_of_kind(lane, kind).with_only_columns(
                s.INTENT.c.id, literal(kind).label("kind"), s.INTENT.c.next_attempt_at
            )
            kinds.append(select(chosen.limit(_lane_limit(lane)).subquery()))
        both = union_all(*kinds).subquery()
        in_lane = select(both).order_by(both.c.kind, both.c.next_attempt_at, both.c.id)
        in_lane = in_lane.limit(_lane_limit(lane)).subquery()
        per_lane.append(select(in_lane, literal(rank).label("lane_rank")))
    ranked = union_all(*per_lane).subquery()
    chosen = (
        select(ranked.c.id)
        .order_by(ranked.c.lane_rank, ranked.c.kind, ranked.c.next_attempt_at, ranked.c.id)
        .limit(bindparam("b_limit", type_=Integer()))
    )
    return (
        update(s.INTENT)
        .where(s.INTENT.c.id.in_(chosen), s.INTENT.c.status == PENDING)
        .values(status=SENDING, updated_at=_NOW)
        .returning(*s.DUE_COLUMNS)
    )


_MARK_DUE_SENDING = _mark_due_sending_statement()
_LANE_RANK = {lane: rank for rank, lane in enumerate(LANES)}


def _mark_due_sending(
    session: Session, now: dt.datetime, limit: int, limits: Mapping[str, int]
) -> list[s.DueIntent]:
    """SQLite: one UPDATE ... RETURNING takes the write lock and the batch at once."""
    values = {"b_now": now, "b_limit": limit}
    values.update({f"b_limit_{lane}": limits[lane] for lane in LANES})
    rows = session.connection().execute(_MARK_DUE_SENDING, values)
    due = [s.DueIntent.from_row(row) for row in rows]
    return sorted(due, key=lambda intent: (_LANE_RANK[intent.lane], *waited_longest(intent)))


_SUPPRESSED_AMONG = select(Suppression.__table__.c.recipient).where(
    Suppression.__table__.c.recipient.in_(bindparam("b_forms", expanding=True))
)
# PostgreSQL: the forms as one array, so the statement's text is the same for every batch
# (an IN list of its own length each time is parsed anew by the driver).
_SUPPRESSED_AMONG_ARRAY = select(Suppression.__table__.c.recipient).where(
    Suppression.__table__.c.recipient == any_(bindparam("b_forms", type_=ARRAY(String)))
)


def suppressed_among(session: Session, recipients: set[str]) -> set[str]:
    """Return those of `recipients` (lowercase) on the suppression list, as such or hashed."""
    if not recipients:
        return set()
    forms = {form: r for r in recipients for form in suppressions.recipient_forms(r)}
    connection = session.connection()
    on_postgresql = connection.dialect.name == "postgresql"
    statement = _SUPPRESSED_AMONG_ARRAY if on_postgresql else _SUPPRESSED_AMONG
    found = connection.execute(statement, {"b_forms": list(forms)})
    return {forms[recipient] for recipient in found.scalars()}


def close_unsent(
    session: Session, not_sent: list[tuple[s.DueIntent, Decision]], now: dt.datetime
) -> None:
    """Move intents that must not be sent now to their decided status (no attempt)."""
    if not_sent:
        session.connection().execute(
            s.CLOSE_UNSENT,
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


def lease(
    session: Session,
    due: Sequence[s.DueIntent],
    now: dt.datetime,
    lease_expires_at: dt.datetime,
    worker_id: str,
) -> list[Claim]:
    """Give each intent a fresh lease token and one new attempt row."""
    if not due:
        return []
    connection = session.connection()
    random_bytes = secrets.token_bytes(16 * len(due))  # one system call for the batch
    tokens = [random_bytes[16 * n : 16 * (n + 1)].hex() for n in range(len(due))]
    if connection.dialect.name == "postgresql":
        attempt_ids = _lease_arrays(connection, due, tokens, now, lease_expires_at, worker_id)
    else:
        attempt_ids = _lease_rows(connection, due, tokens, now, lease_expires_at, worker_id)
    return [
        Claim(intent, attempt_ids[token], intent.attempt_count + 1, token, lease_expires_at)
        for intent, token in zip(due, tokens, strict=True)
    ]


def _lease_rows(connection, due, tokens, now, lease_expires_at, worker_id) -> dict[str, int]:
    """One bound row a statement execution (SQLite); the attempt id of each lease token."""
    connection.execute(
        s.LEASE_INTENT,
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
        s.INSERT_ATTEMPTS,
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
    return {token: attempt_id for token, attempt_id in inserted}


def release(
    session: Session,
    claims: Sequence[Claim],
    now: dt.datetime,
    due_at: dt.datetime | None = None,
) -> int:
    """Give back claims that never reached the transport: pending again (due at `due_at`,
    default now), attempt removed and not counted."""
    connection = session.connection()
    released = 0
    for claim in claims:
        values = dict(b_id=claim.intent.id, b_token=claim.lease_token, b_now=now)
        moved = connection.execute(s.RELEASE_INTENT, dict(values, b_due_at=due_at or now))
        if moved.rowcount == 1:
            connection.execute(s.DELETE_ATTEMPT, {"b_id": claim.attempt_id})
            released += 1
    return released


# Leases as arrays (PostgreSQL) -------------------------------------------------------------------
#
# PostgreSQL: lease a claimed batch in one statement whose values travel as arrays.
#
# Leasing a batch row by row costs an ``UPDATE`` execution per intent and an ``INSERT`` with
# several placeholders per attempt, whose text the driver parses anew every claim (too long for its
# query cache). Here the batch's ids, tokens and counts are three arrays ``unnest`` turns back into
# rows: the same rows written, in one short statement prepared once (the ``UPDATE`` in its
# ``WITH``, the ``INSERT`` of the attempts after).


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


def _lease_arrays(
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


# Lease sweep -------------------------------------------------------------------------------------
#
# Leases whose worker went silent: take them back, then settle each as decided.
#
# The worker runs the two steps and decides in between; neither commits (the worker's housekeeping
# transaction does):
#
# - ``take_expired_leases``: intents still ``sending`` after their lease ran out; their open
#   attempt is finished first, so its worker can no longer mark DATA_SENT — the stage it had
#   reached is what the worker judges by;
# - ``settle_expired_lease``: move the intent (compare-and-set on the lease token) and write the
#   verdict on its attempt.

SWEEP_BATCH_SIZE = 200


@dataclasses.dataclass(frozen=True)
class ExpiredLease:
    """An intent still ``sending`` after its lease ran out, and how far its attempt got."""

    intent: s.DueIntent
    lease_token: str
    attempt_id: int | None
    stage: str


def take_expired_leases(session: Session, *, now: dt.datetime) -> list[ExpiredLease]:
    """Find silent workers' intents and finish their attempts (up to a batch)."""
    query = (
        select(*s.DUE_COLUMNS, Intent.lease_token, Attempt.id)
        .outerjoin(
            Attempt,
            (Attempt.intent_id == Intent.id) & (Attempt.lease_token == Intent.lease_token),
        )
        .where(Intent.status == SENDING, Intent.lease_expires_at < now)
        .limit(SWEEP_BATCH_SIZE)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=Intent)
    leases = (_finish_silent_attempt(session, row, now) for row in session.execute(query).all())
    return [lease for lease in leases if lease is not None]


def _finish_silent_attempt(session: Session, row: Any, now: dt.datetime) -> ExpiredLease | None:
    """Finish the attempt first: from then on its worker can no longer mark DATA_SENT."""
    intent, lease_token, attempt_id = s.DueIntent.from_row(row), row[-2], row[-1]
    if attempt_id is None:
        return ExpiredLease(intent, lease_token, None, CLAIMED)
    finished = session.connection().execute(
        s.FINISH_SILENT_ATTEMPT, {"b_id": attempt_id, "b_now": now}
    )
    stage = finished.scalar_one_or_none()
    if stage is None:
        return None
    return ExpiredLease(intent, lease_token, attempt_id, stage)


def settle_expired_lease(
    session: Session,
    lease: ExpiredLease,
    classification: Classification,
    decision: Decision,
    now: dt.datetime,
) -> bool:
    """Move the intent of `lease` as decided, if no one else did meanwhile."""
    connection = session.connection()
    moved = connection.execute(
        s.MOVE_LEASED_INTENT,
        dict(
            b_id=lease.intent.id,
            b_token=lease.lease_token,
            b_status=decision.status,
            b_reason=s.clip(decision.reason, s.ERROR_TEXT_LIMIT),
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
            s.JUDGE_SILENT_ATTEMPT,
            dict(
                b_id=lease.attempt_id,
                b_outcome=classification.outcome,
                b_error=s.clip(classification.reason, s.ERROR_TEXT_LIMIT),
            ),
        )
    return True
