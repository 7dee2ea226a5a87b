"""The claim and the lease sweep: the steps both databases share.

T1 of the send loop locks due intents (the engine's ``lock_due``: its SQL differs by
database), screens them (``suppressed_among``: which of the batch's recipients are on
the suppression list), closes those not to send (``close_unsent``), leases the rest (the
engine's ``lease``) and commits; ``release`` gives back claims never handed to the
transport. The sweep takes back the leases of a worker that went silent: the engine's
``take_expired_leases`` finds them and finishes their open attempts
(``finish_silent_attempts``), so their worker can no longer mark ``data_sent`` — the stage
it had reached is what the worker judges by; ``settle_expired_lease`` then moves each
intent as decided. Every write is guarded by the lease token (intents) or ``finished_at
IS NULL`` (attempts), so concurrent workers and sweeps cannot both win. Nothing here
commits: the caller's transaction does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    bindparam,
    exists,
    func,
    literal,
    literal_column,
    select,
)
from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.model_columns import UTCDateTime
from console.models import Attempt, Intent, Suppression
from console.state_tables import DomainDeferral
from console.store import holds, suppressions
from console.store import statements as s
from console.vocabulary import CLAIMED, CRITICAL, LANES, PENDING, SENDING


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


# The claim's statements are built once; each claim binds `now` and the limits.
NOW = bindparam("b_now", type_=UTCDateTime())


def due_in_lane(lane: str) -> Select:
    """The due intents of `lane`: not held, their domain not deferred."""
    intent = s.INTENT.c
    return (
        select(*s.DUE_COLUMNS)
        .where(intent.status == PENDING, intent.lane == lane, intent.next_attempt_at <= NOW)
        .where(~_in_deferred_domain(NOW))
        .where(~holds.lane_held(lane, NOW), ~holds.intent_held(NOW))
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


def due_of_kind(lane: str, kind: int):
    """The due intents of `lane` of one kind (RETRY, FIRST_TRY), oldest first."""
    intent = s.INTENT.c
    of_kind = RETRY_DUE if kind == RETRY else intent.attempt_count == literal_column("0")
    return due_in_lane(lane).where(of_kind).order_by(intent.next_attempt_at, intent.id)


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


def lane_limit(lane: str):
    """The bound parameter of `lane`'s cap in a claim's statement."""
    return bindparam(f"b_limit_{lane}", type_=Integer())


_CRITICAL_DUE = select(exists(due_in_lane(CRITICAL).with_only_columns(s.INTENT.c.id)))


def critical_due(connection: Connection, now: dt.datetime) -> bool:
    """Whether a critical intent is due at `now` (as a claim would find it)."""
    return bool(connection.execute(_CRITICAL_DUE, {"b_now": now}).scalar())


_SUPPRESSED_AMONG = select(Suppression.__table__.c.recipient).where(
    Suppression.__table__.c.recipient.in_(bindparam("b_forms", expanding=True))
)


def suppressed_among(session: Session, recipients: set[str]) -> set[str]:
    """Those of `recipients` (lowercase) on the suppression list, as such or hashed."""
    if not recipients:
        return set()
    forms = {form: r for r in recipients for form in suppressions.recipient_forms(r)}
    found = session.connection().execute(_SUPPRESSED_AMONG, {"b_forms": list(forms)})
    return {forms[recipient] for recipient in found.scalars()}


def close_unsent(
    session: Session, not_sent: Sequence[tuple[s.DueIntent, Decision]], now: dt.datetime
) -> None:
    """Move intents that must not be sent now to their decided status (no attempt)."""
    if not_sent:
        session.connection().execute(s.CLOSE_UNSENT, close_unsent_values(not_sent, now))


def close_unsent_values(
    not_sent: Sequence[tuple[s.DueIntent, Decision]], now: dt.datetime
) -> list[dict[str, Any]]:
    """What closing each of `not_sent` at `now` binds, one dict an intent."""
    return [
        dict(
            b_id=intent.id,
            b_status=decision.status,
            b_reason=decision.reason,
            b_now=now,
            b_next_attempt_at=decision.next_attempt_at,
        )
        for intent, decision in not_sent
    ]


def lease_tokens(count: int) -> list[str]:
    """`count` fresh random lease tokens (one system call for them all)."""
    random_bytes = secrets.token_bytes(16 * count)
    return [random_bytes[16 * n : 16 * (n + 1)].hex() for n in range(count)]


def claims_of(
    due: Sequence[s.DueIntent],
    tokens: list[str],
    attempt_ids: Mapping[str, int],
    lease_expires_at: dt.datetime,
) -> list[Claim]:
    """The claims of `due` leased under `tokens`, with the attempt id of each token."""
    return [
        Claim(intent, attempt_ids[token], intent.attempt_count + 1, token, lease_expires_at)
        for intent, token in zip(due, tokens, strict=True)
    ]


def release(
    session: Session, returned: Sequence[tuple[Claim, dt.datetime]], now: dt.datetime
) -> int:
    """Give back claims that never reached the transport: pending again (each due at the
    time paired with it), attempt removed and not counted."""
    connection = session.connection()
    released = 0
    for claim, due_at in returned:
        values = dict(b_id=claim.intent.id, b_token=claim.lease_token, b_now=now)
        moved = connection.execute(s.RELEASE_INTENT, dict(values, b_due_at=due_at))
        if moved.rowcount == 1:
            connection.execute(s.DELETE_ATTEMPT, {"b_id": claim.attempt_id})
            released += 1
    return released


SWEEP_BATCH_SIZE = 200


@dataclasses.dataclass(frozen=True)
class ExpiredLease:
    """An intent still ``sending`` after its lease ran out, and how far its attempt got."""

    intent: s.DueIntent
    lease_token: str
    attempt_id: int | None
    stage: str


def expired_leases(now: dt.datetime) -> Select:
    """Intents still ``sending`` after their lease ran out, each with its open attempt."""
    return (
        select(*s.DUE_COLUMNS, Intent.lease_token, Attempt.id)
        .outerjoin(
            Attempt,
            (Attempt.intent_id == Intent.id) & (Attempt.lease_token == Intent.lease_token),
        )
        .where(Intent.status == SENDING, Intent.lease_expires_at < now)
        .limit(SWEEP_BATCH_SIZE)
    )


def finish_silent_attempts(session: Session, rows: Sequence[Any], now: dt.datetime):
    """Finish the open attempt of each expired lease in `rows` (``expired_leases``): from
    then on its worker can no longer mark ``data_sent``. The leases still to settle."""
    leases = (_finish_silent_attempt(session, row, now) for row in rows)
    return [lease for lease in leases if lease is not None]


def _finish_silent_attempt(session: Session, row: Any, now: dt.datetime) -> ExpiredLease | None:
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


def settle_expired_leases(
    session: Session, leases: Sequence[ExpiredLease], judge, now: dt.datetime
) -> list[tuple[ExpiredLease, Decision]]:
    """Move the intent of each of `leases` as `judge` (``Engine.sweep``'s) decides; those
    moved, with their decision."""
    settled = []
    for lease in leases:
        classification, decision = judge(lease, now)
        if settle_expired_lease(session, lease, classification, decision, now):
            settled.append((lease, decision))
    return settled


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
