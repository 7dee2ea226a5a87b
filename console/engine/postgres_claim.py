"""The claim's steps on PostgreSQL: plain SQL (``postgres_sql``) on one connection of the
engine's pool, in one transaction.

Due rows are locked with ``FOR UPDATE SKIP LOCKED``, lane by lane and each lane's retries
first, so workers on other machines skip what this one holds rather than wait for it. A
batch is leased in one statement whose values travel as arrays (``unnest``): the
intents leased in a data-modifying ``WITH``, an attempt added for each, each attempt's id
returned with its lease token. The send budget's row lock makes concurrent claims take
turns on the shared rate and quota until the claim commits.

The application's eligibility check takes a ``Session``: it runs on one of its own, in a
thread (``Engine.in_session``), so the event loop goes on sending meanwhile.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence

import psycopg
from sqlalchemy.orm import Session

from console.core.breaker import BreakerState
from console.core.lifecycle import Decision
from console.core.token_bucket import BucketPolicy
from console.engine import postgres_sql as q
from console.engine.base import T
from console.engine.postgres_follow_ups import move_breaker
from console.engine.postgres_values import aware, utc_rows
from console.store import claims, send_budget, send_guards, suppressions
from console.store.claims import Claim
from console.store.statements import DueIntent
from console.vocabulary import LANES


class PostgresClaimSteps:
    """``ClaimSteps`` on PostgreSQL: the claim's statements on `connection`, in its
    transaction; `in_session` runs the application's check."""

    def __init__(
        self,
        connection: psycopg.AsyncConnection,
        in_session: Callable[[Callable[[Session], T]], Awaitable[T]],
    ) -> None:
        self._connection = connection
        self._in_session = in_session

    async def read_breakers(self) -> dict[str, BreakerState]:
        rows = await self._rows(q.READ_BREAKERS, {})
        return send_guards.stored_breakers(utc_rows(rows))

    async def move_breaker(
        self, lane: str, seen: BreakerState, new: BreakerState, now: dt.datetime, owner: str
    ) -> bool:
        return await move_breaker(self._connection, lane, seen, new, now, owner)

    async def critical_due(self, now: dt.datetime) -> bool:
        [(due,)] = await self._rows(q.CRITICAL_DUE, aware({"b_now": now}))
        return bool(due)

    async def lock_budget(self, now: float) -> None:
        locked = await self._connection.execute(q.LOCK_BUDGET, {"name": send_budget.BUCKET})
        if locked.rowcount == 0:  # the first claim ever
            await self._connection.execute(q.CREATE_BUCKET, send_budget.new_bucket_values(now))
            await self._connection.execute(q.LOCK_BUDGET, {"name": send_budget.BUCKET})

    async def take_tokens(self, policy: BucketPolicy, now: float, want: int) -> tuple[int, float]:
        values = dict(send_budget.bucket_values(policy), now=now, want=want)
        rows = await self._rows(q.TAKE_TOKENS, values)
        if not rows:  # the first claim ever
            await self._connection.execute(q.CREATE_BUCKET, send_budget.new_bucket_values(now))
            rows = await self._rows(q.TAKE_TOKENS, values)
        [(taken, left)] = rows
        return int(taken), float(left)

    async def sent_since(self, since: float) -> int:
        [(sent,)] = await self._rows(q.SENT_SINCE, {"first_hour": send_budget.hour_of(since)})
        return int(sent)

    async def settle_budget(
        self, policy: BucketPolicy | None, unused: int, now: float, leased: int
    ) -> None:
        if policy is not None and unused > 0:
            values = dict(name=send_budget.BUCKET, burst=policy.burst, tokens=unused)
            await self._connection.execute(q.REFUND_TOKENS, values)
        if leased > 0:
            hour = send_budget.hour_of(now)
            await self._connection.execute(q.COUNT_SENT, dict(hour=hour, sent=leased))
            oldest = hour - send_budget.KEPT_HOURS * send_budget.HOUR
            await self._connection.execute(q.FORGET_OLD_COUNTS, dict(oldest=oldest))

    async def lock_due(
        self, now: dt.datetime, limit: int, limits: Mapping[str, int]
    ) -> list[DueIntent]:
        due: list[DueIntent] = []
        for lane in LANES:
            in_lane = 0
            for retries in (True, False):
                remaining = min(limit - len(due), limits[lane] - in_lane)
                if remaining <= 0:
                    break
                values = aware({"b_now": now, "b_limit": remaining})
                rows = await self._rows(q.LOCK_DUE[(lane, retries)], values)
                due += [DueIntent.from_row(row) for row in utc_rows(rows)]
                in_lane += len(rows)
        return due

    async def suppressed_among(self, recipients: set[str]) -> set[str]:
        if not recipients:
            return set()
        forms = {form: r for r in recipients for form in suppressions.recipient_forms(r)}
        rows = await self._rows(q.SUPPRESSED_AMONG, {"b_forms": list(forms)})
        return {forms[recipient] for (recipient,) in rows}

    async def check(self, work: Callable[[Session], T]) -> T:
        return await self._in_session(work)

    async def close_unsent(
        self, not_sent: Sequence[tuple[DueIntent, Decision]], now: dt.datetime
    ) -> None:
        if not not_sent:
            return
        values = [aware(each) for each in claims.close_unsent_values(not_sent, now)]
        await self._connection.cursor().executemany(q.CLOSE_UNSENT, values)

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
        values = dict(
            b_ids=[intent.id for intent in due],
            b_tokens=tokens,
            b_numbers=[intent.attempt_count + 1 for intent in due],
            b_now=now,
            b_lease_expires_at=lease_expires_at,
            b_worker_id=worker_id,
        )
        inserted = await self._rows(q.LEASE_BATCH, aware(values))
        attempt_ids = {token: attempt_id for token, attempt_id in inserted}
        return claims.claims_of(due, tokens, attempt_ids, lease_expires_at)

    async def _rows(self, sql: str, values: dict) -> list:
        return await (await self._connection.execute(sql, values)).fetchall()
