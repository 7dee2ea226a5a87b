"""The writes an outcome calls for, on PostgreSQL: plain SQL (``postgres_sql``) on a
connection of the engine's pool, each committed on return.

The breaker and the alert are compare-and-set, so when several workers write at once the
first one wins and the others learn it; a refused session's hold moves the intent only
while this worker's lease holds it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg.types.json import Json

from console.core.breaker import BreakerState
from console.core.domain_backoff import Deferral
from console.engine import postgres_sql as q
from console.engine.postgres_values import aware, utc_rows
from console.store import alerts, send_budget, send_guards, suppressions
from console.store.claims import Claim
from console.store.statements import ERROR_TEXT_LIMIT, clip
from console.vocabulary import CLOSED


class PostgresFollowUps:
    """What follows a record on PostgreSQL, on the engine's ``_run`` (a statement alone)
    and ``_transaction`` (several in one transaction)."""

    async def read_breakers(self) -> dict[str, BreakerState]:
        _, rows = await self._run(q.READ_BREAKERS, {}, "breakers")
        return send_guards.stored_breakers(utc_rows(rows))

    async def move_breaker(
        self,
        lane: str,
        seen: BreakerState,
        new: BreakerState,
        now: dt.datetime,
        owner: str | None = None,
    ) -> bool:
        async with self._transaction("breaker") as connection:
            return await move_breaker(connection, lane, seen, new, now, owner)

    async def defer_domain(self, deferral: Deferral, code: int | None, now: dt.datetime) -> int:
        values = aware(
            dict(
                domain=deferral.domain,
                until=deferral.until,
                code=code,
                now=now,
                pattern=send_guards.domain_pattern(deferral.domain),
            )
        )
        async with self._transaction("domain deferral") as connection:
            await connection.execute(q.DELETE_EXPIRED_DEFERRALS, values)
            await connection.execute(q.STORE_DEFERRAL, values)
            return (await connection.execute(q.DEFER_DOMAINS_INTENTS, values)).rowcount

    async def halve_rate(self, now: float) -> bool:
        halved, _ = await self._run(q.HALVE_RATE, send_budget.halving_values(now), "rate")
        return halved == 1

    async def suppress_refused_mailbox(
        self, recipient: str, reply: str, attempt_id: int, now: dt.datetime
    ) -> bool:
        values = aware(suppressions.refused_mailbox_values(recipient, reply, attempt_id, now))
        _, rows = await self._run(q.SUPPRESS_REFUSED_MAILBOX, values, "suppression")
        return bool(rows)

    async def fire_alert(
        self, key: str, summary: str, details: dict[str, Any], now: dt.datetime
    ) -> bool:
        values = aware(alerts.firing_values(summary, details, now))
        values.update(condition=key, details=Json(details))
        _, rows = await self._run(q.FIRE_ALERT, values, "alert")
        return bool(rows)

    async def hold_refused(
        self, claim: Claim, due_at: dt.datetime, reason: str, now: dt.datetime
    ) -> bool:
        values = dict(
            b_id=claim.intent.id,
            b_token=claim.lease_token,
            b_attempt_id=claim.attempt_id,
            b_reason=clip(reason, ERROR_TEXT_LIMIT),
            b_due_at=due_at,
            b_now=now,
        )
        _, rows = await self._run(q.GIVE_BACK, aware(values), "hold")
        return bool(rows)


async def move_breaker(
    connection: psycopg.AsyncConnection,
    lane: str,
    seen: BreakerState,
    new: BreakerState,
    now: dt.datetime,
    owner: str | None,
) -> bool:
    """Store `new` for `lane` only if it still holds `seen`, in the transaction of
    `connection`: whether it moved."""
    values = dict(lane=lane, seen_state=seen.state, seen_trips=seen.trips)
    values = aware({**values, **send_guards.breaker_values(new, now, owner)})
    if seen.state == CLOSED and seen.trips == 0:
        cursor = await connection.execute(q.INSERT_BREAKER_IF_ABSENT, values)
        if await cursor.fetchone() is not None:
            return True
    return (await connection.execute(q.MOVE_BREAKER, values)).rowcount == 1
