"""The shared state of the send loop's protections: lane breakers and per-domain deferral.

Every worker reads and writes these rows, so all of them obey one breaker and
one deferral; the console shows them. Nothing here commits: the caller does.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import case, delete, select, update
from sqlalchemy.orm import Session

from console.core.breaker import BreakerState
from console.core.domain_backoff import Deferral
from console.models import Intent
from console.state_tables import DomainDeferral, LaneBreaker
from console.store.statements import SqlKit
from console.vocabulary import CLOSED, LANES, PENDING

_LIKE_SPECIALS = str.maketrans({"%": r"\%", "_": r"\_", "\\": r"\\"})


def read_breakers(session: Session) -> dict[str, BreakerState]:
    """Return every lane's breaker state (closed when the lane has no row yet)."""
    b = LaneBreaker
    query = select(b.lane, b.state, b.trips, b.failure_rate, b.opened_at, b.resume_at)
    return stored_breakers(session.execute(query))


def write_breaker_state(
    session: Session,
    sql: SqlKit,
    lane: str,
    expected: BreakerState,
    new: BreakerState,
    now: dt.datetime,
    owner: str | None = None,
) -> bool:
    """Move `lane` from `expected` to `new` unless another worker moved it first (`sql`: the
    database's spelling, its engine's ``sql``)."""
    values = breaker_values(new, now, owner)
    if expected.state == CLOSED and expected.trips == 0:
        if _insert_breaker_if_absent(session, sql, lane, values):
            return True
    moved = session.execute(
        update(LaneBreaker)
        .where(
            LaneBreaker.lane == lane,
            LaneBreaker.state == expected.state,
            LaneBreaker.trips == expected.trips,
        )
        .values(**values)
    ).rowcount
    return moved == 1


def breaker_values(
    new: BreakerState, now: dt.datetime, owner: str | None = None
) -> dict[str, object]:
    """A lane breaker's row in state `new` (a probe's `owner`), written at `now`."""
    return dict(
        state=new.state,
        trips=new.trips,
        failure_rate=new.failure_rate,
        opened_at=new.opened_at,
        resume_at=new.resume_at,
        probe_owner=owner,
        updated_at=now,
    )


def stored_breakers(rows) -> dict[str, BreakerState]:
    """Every lane's breaker from its stored `rows` (lane, state, trips, failure rate,
    opened at, resume at); closed when the lane has none."""
    states = {row[0]: BreakerState(*row[1:]) for row in rows}
    return {lane: states.get(lane, BreakerState()) for lane in LANES}


def _insert_breaker_if_absent(session: Session, sql: SqlKit, lane: str, values: dict) -> bool:
    statement = (
        sql.insert(LaneBreaker)
        .values(lane=lane, **values)
        .on_conflict_do_nothing(index_elements=["lane"])
        .returning(LaneBreaker.lane)
    )
    return session.execute(statement).scalar_one_or_none() is not None


def defer_domain(
    session: Session, sql: SqlKit, deferral: Deferral, code: int | None, now: dt.datetime
) -> int:
    """Record the domain's deferral for every worker and move its due pending intents to its end
    (`sql`: the database's spelling, its engine's ``sql``).

    Returns how many pending intents moved. Expired deferrals are deleted on the way; a
    deferral already stored that ends later keeps its end.
    """
    session.execute(delete(DomainDeferral).where(DomainDeferral.deferred_until <= now))
    statement = sql.insert(DomainDeferral).values(
        domain=deferral.domain, deferred_until=deferral.until, reply_code=code, updated_at=now
    )
    stored, new = DomainDeferral.deferred_until, statement.excluded.deferred_until
    later = case((new > stored, new), else_=stored)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["domain"],
            set_=dict(deferred_until=later, reply_code=code, updated_at=now),
        )
    )
    pattern = domain_pattern(deferral.domain)
    return session.execute(
        update(Intent)
        .where(
            Intent.status == PENDING,
            Intent.next_attempt_at < deferral.until,
            Intent.recipient.like(pattern, escape="\\"),
        )
        .values(next_attempt_at=deferral.until)
    ).rowcount


def domain_pattern(domain: str) -> str:
    """LIKE's pattern (escaped by a backslash) of the addresses at `domain`."""
    return "%@" + domain.translate(_LIKE_SPECIALS)


def active_deferrals(session: Session, now: dt.datetime) -> list[DomainDeferral]:
    """Return the domains deferred now, soonest end first (for the dashboard)."""
    query = (
        select(DomainDeferral)
        .where(DomainDeferral.deferred_until > now)
        .order_by(DomainDeferral.deferred_until, DomainDeferral.domain)
    )
    return list(session.scalars(query))
