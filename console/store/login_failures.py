"""Failed logins, counted in the database so every process shares them and a restart keeps them.

Two kinds of row in ``login_failure_count``: one per (username, client address) pair and one per
address (username ``""``). Each counts failures since its ``first_failure_at``; a row whose last
failure is older than its ``forget_after`` starts again from one. The policy (how many, how long
to wait) is the caller's: these functions only count, read and forget. They never commit.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import case, delete, literal, or_, select, update
from sqlalchemy.orm import Session

from console.model_columns import UTCDateTime
from console.state_tables import LoginFailureCount
from console.store.address_redaction import mentions
from console.store.sql_helpers import dialect_of, insert_for

ANY_USER = ""  # the username of the per-address row
USERNAME_KEY_LENGTH = 100
ADDRESS_KEY_LENGTH = 64


@dataclass(frozen=True)
class FailureCount:
    failures: int
    first_failure_at: dt.datetime
    retry_at: dt.datetime | None


def _key(username: str, address: str) -> tuple[str, str]:
    return username[:USERNAME_KEY_LENGTH], address[:ADDRESS_KEY_LENGTH]


def read_count(session: Session, username: str, address: str) -> FailureCount | None:
    """Return the count of (`username`, `address`) (ANY_USER: the address's), or None."""
    name, addr = _key(username, address)
    row = session.execute(
        select(
            LoginFailureCount.failures,
            LoginFailureCount.first_failure_at,
            LoginFailureCount.retry_at,
        ).where(LoginFailureCount.username == name, LoginFailureCount.address == addr)
    ).first()
    return None if row is None else FailureCount(*row)


def count_failure(
    session: Session,
    username: str,
    address: str,
    *,
    now: dt.datetime,
    forget_after: dt.timedelta,
    window: dt.timedelta | None = None,
) -> FailureCount:
    """Add one failure to the row (atomic across processes); return the new count.

    The count starts again at one when the last failure is older than
    `forget_after`, or the first one older than `window` (a fixed window).
    """
    name, addr = _key(username, address)
    table = LoginFailureCount.__table__
    stale = table.c.last_failure_at < now - forget_after
    if window is not None:
        stale = or_(stale, table.c.first_failure_at < now - window)
    at_now = literal(now, UTCDateTime())
    insert = insert_for(dialect_of(session))(table).values(
        username=name, address=addr, failures=1, first_failure_at=now, last_failure_at=now
    )
    statement = insert.on_conflict_do_update(
        index_elements=[table.c.username, table.c.address],
        set_={
            "failures": case((stale, 1), else_=table.c.failures + 1),
            "first_failure_at": case((stale, at_now), else_=table.c.first_failure_at),
            "retry_at": case((stale, None), else_=table.c.retry_at),
            "last_failure_at": at_now,
        },
    ).returning(table.c.failures, table.c.first_failure_at, table.c.retry_at)
    return FailureCount(*session.execute(statement).one())


def set_retry_at(session: Session, username: str, address: str, retry_at: dt.datetime) -> None:
    """Refuse logins of (`username`, `address`) before `retry_at`."""
    name, addr = _key(username, address)
    session.execute(
        update(LoginFailureCount)
        .where(LoginFailureCount.username == name, LoginFailureCount.address == addr)
        .values(retry_at=retry_at)
        .execution_options(synchronize_session=False)
    )


def forget(session: Session, username: str, address: str) -> None:
    """Drop the count of (`username`, `address`): it logged in."""
    name, addr = _key(username, address)
    session.execute(
        delete(LoginFailureCount)
        .where(LoginFailureCount.username == name, LoginFailureCount.address == addr)
        .execution_options(synchronize_session=False)
    )


def forget_older_than(session: Session, cutoff: dt.datetime) -> int:
    """Drop every count whose last failure is before `cutoff`; return how many."""
    result = session.execute(
        delete(LoginFailureCount)
        .where(LoginFailureCount.last_failure_at < cutoff)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount


def forget_login_failures(session: Session, address: str) -> int:
    """Delete the failed-login counts of usernames that name `address`; never commits.

    The count of each client address (username "") stays.
    """
    statement = delete(LoginFailureCount).where(
        LoginFailureCount.username != "", mentions(LoginFailureCount.username, address)
    )
    return session.execute(statement, execution_options={"synchronize_session": False}).rowcount
