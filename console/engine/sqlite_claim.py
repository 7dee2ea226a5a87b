"""The claim's steps on SQLite: one ``Session`` for the claim's transaction, in the event
loop's thread, on the store's statements (``claims``, ``send_guards``, ``send_budget``).

SQLite has one writer: the claim takes the write lock and the batch at once, with one
``UPDATE ... RETURNING`` that marks the rows ``sending`` before another worker could see
them ``pending``. The application's eligibility check runs on the claim's own session.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from sqlalchemy import Integer, bindparam, literal, select, union_all, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session, sessionmaker

from console.core.breaker import BreakerState
from console.core.lifecycle import Decision
from console.core.token_bucket import BucketPolicy
from console.engine.base import T
from console.store import claims, send_budget, send_guards
from console.store import statements as s
from console.store.claims import FIRST_TRY, NOW, RETRY, Claim
from console.store.statements import DueIntent, SqlKit
from console.vocabulary import CLAIMED, LANES, PENDING, SENDING

# SQLite's own INSERT takes ON CONFLICT; its min() and max() of two or more arguments are
# scalar functions
SQL = SqlKit(insert=sqlite.insert, least="MIN", greatest="MAX")
_LANE_RANK = {lane: rank for rank, lane in enumerate(LANES)}


def _mark_due_sending_statement():
    """One UPDATE ... RETURNING that takes the write lock and the batch at once: each
    lane's retries then first attempts, oldest first, lanes in their order."""
    per_lane = []
    for rank, lane in enumerate(LANES):
        kinds = []
        for kind in (RETRY, FIRST_TRY):
            chosen = claims.due_of_kind(lane, kind).with_only_columns(
                s.INTENT.c.id, literal(kind).label("kind"), s.INTENT.c.next_attempt_at
            )
            kinds.append(select(chosen.limit(claims.lane_limit(lane)).subquery()))
        both = union_all(*kinds).subquery()
        in_lane = select(both).order_by(both.c.kind, both.c.next_attempt_at, both.c.id)
        in_lane = in_lane.limit(claims.lane_limit(lane)).subquery()
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
        .values(status=SENDING, updated_at=NOW)
        .returning(*s.DUE_COLUMNS)
    )


MARK_DUE_SENDING = _mark_due_sending_statement()


@contextlib.asynccontextmanager
async def claim_transaction(sessions: sessionmaker[Session]) -> AsyncIterator[SqliteClaimSteps]:
    """A claim's steps in a session of their own, committed when the block ends."""
    with sessions() as session:
        yield SqliteClaimSteps(session)
        session.commit()


class SqliteClaimSteps:
    """``ClaimSteps`` on SQLite: the store's steps on one session."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def read_breakers(self) -> dict[str, BreakerState]:
        return send_guards.read_breakers(self._session)

    async def move_breaker(
        self, lane: str, seen: BreakerState, new: BreakerState, now: dt.datetime, owner: str
    ) -> bool:
        return send_guards.write_breaker_state(self._session, SQL, lane, seen, new, now, owner)

    async def critical_due(self, now: dt.datetime) -> bool:
        return claims.critical_due(self._session.connection(), now)

    async def lock_budget(self, now: float) -> None:
        send_budget.lock_budget(self._session, now)

    async def take_tokens(self, policy: BucketPolicy, now: float, want: int) -> tuple[int, float]:
        return send_budget.take_tokens(self._session, SQL, policy, now, want)

    async def sent_since(self, since: float) -> int:
        return send_budget.sent_since(self._session, since)

    async def settle_budget(
        self, policy: BucketPolicy | None, unused: int, now: float, leased: int
    ) -> None:
        if policy is not None:
            send_budget.give_back(self._session, policy, unused)
        send_budget.count_sent(self._session, now, leased)

    async def lock_due(
        self, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        values = {"b_now": now, "b_limit": limit}
        values.update({f"b_limit_{lane}": limits[lane] for lane in LANES})
        rows = self._session.connection().execute(MARK_DUE_SENDING, values)
        due = [DueIntent.from_row(row) for row in rows]
        return sorted(due, key=lambda i: (_LANE_RANK[i.lane], *claims.waited_longest(i)))

    async def suppressed_among(self, recipients: set[str]) -> set[str]:
        return claims.suppressed_among(self._session, recipients)

    async def check(self, work: Callable[[Session], T]) -> T:
        return work(self._session)

    async def close_unsent(
        self, not_sent: Sequence[tuple[DueIntent, Decision]], now: dt.datetime
    ) -> None:
        claims.close_unsent(self._session, not_sent, now)

    async def lease(
        self,
        due: Sequence[DueIntent],
        now: dt.datetime,
        lease_expires_at: dt.datetime,
        worker_id: str,
    ) -> list[Claim]:
        if not due:
            return []
        tokens = claims.lease_tokens(len(due))
        numbered = [
            (intent, token, intent.attempt_count + 1)
            for intent, token in zip(due, tokens, strict=True)
        ]
        connection = self._session.connection()
        connection.execute(
            s.LEASE_INTENT,
            [
                dict(
                    b_id=intent.id,
                    b_token=token,
                    b_lease_expires_at=lease_expires_at,
                    b_attempt_count=number,
                    b_now=now,
                )
                for intent, token, number in numbered
            ],
        )
        inserted = connection.execute(
            s.INSERT_ATTEMPTS,
            [
                dict(
                    intent_id=intent.id,
                    attempt_number=number,
                    lease_token=token,
                    worker_id=worker_id,
                    stage=CLAIMED,
                    started_at=now,
                )
                for intent, token, number in numbered
            ],
        )
        attempt_ids = {token: attempt_id for token, attempt_id in inserted}
        return claims.claims_of(due, tokens, attempt_ids, lease_expires_at)
