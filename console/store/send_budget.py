"""The send budget every worker shares: the rate's token bucket and the hourly send counts,
which decide how much the workers may send.

``take_tokens`` is one ``UPDATE ... RETURNING`` on the bucket's row: it refills the bucket to
`now`, takes up to the wanted tokens, and returns how many it took and how many are left (the
worker gives the bulk lanes all but the critical reserve). On PostgreSQL the row lock makes
concurrent claims take turns, and it is held until the claim commits, so the quota read and count
that follow are serialised too. The arithmetic is ``console.core.token_bucket``'s, written in SQL
(tests check they agree).

Like the rest of the claim (``claims``), nothing here commits: the caller does.
"""

from __future__ import annotations

from sqlalchemy import Connection, case, func, insert, select, text, update
from sqlalchemy.orm import Session

from console.core import token_bucket as tb
from console.state_tables import SendBudget, SendCount
from console.store.statements import SqlKit

BUCKET = "send"
HOUR = 3600
KEPT_HOURS = 48  # hours of counts kept
_BUDGET = SendBudget.__table__
_COUNT = SendCount.__table__


def _floor(expression: str) -> str:
    """FLOOR, spelt so both databases run it (SQLite may lack its math functions): a cast
    to an integer truncates (SQLite) or rounds (PostgreSQL); one less when that went up."""
    whole = f"CAST({expression} AS BIGINT)"
    return f"({whole} - CASE WHEN ({expression}) < {whole} THEN 1 ELSE 0 END)"


def _factor_now(sql: SqlKit) -> str:
    steps = _floor("(:now - slowed_at - :hold) / :step")
    return f"{sql.least}(1.0, factor + :step_fraction * {sql.greatest}(0, {steps} + 1))"


def _take_statement(sql: SqlKit):
    gained = f"{sql.greatest}(0.0, :now - refilled_at) * :rate * {_factor_now(sql)}"
    available = f"{sql.least}(:burst, tokens + {gained})"
    taken = f"{sql.least}(:want, {_floor(available)})"
    return text(
        f"UPDATE send_budget SET tokens = {available} - {taken}, "
        f"refilled_at = {sql.greatest}(refilled_at, :now), taken = {taken} "
        "WHERE name = :name RETURNING taken, tokens"
    )


def _halve_statement(sql: SqlKit):
    factor = f"{sql.greatest}(:min_factor, {_factor_now(sql)} / 2)"
    return text(
        f"UPDATE send_budget SET factor = {factor}, slowed_at = :now, tokens = 0, "
        "refilled_at = :now WHERE name = :name AND :now - slowed_at >= :every"
    )


# the first claim ever: an empty bucket (tb.start); a concurrent first claim made it already
_CREATE_BUCKET = text(
    "INSERT INTO send_budget (name, tokens, refilled_at) VALUES (:name, :tokens, :refilled_at) "
    "ON CONFLICT DO NOTHING"
)


def bucket_values(policy: tb.BucketPolicy) -> dict[str, float | str]:
    """What the statements on the bucket under `policy` bind (beside `now`)."""
    return dict(
        name=BUCKET,
        rate=policy.rate,
        burst=policy.burst,
        hold=tb.HOLD_SECONDS,
        step=tb.STEP_SECONDS,
        step_fraction=tb.STEP_FRACTION,
    )


def take_tokens(
    session: Session, sql: SqlKit, policy: tb.BucketPolicy, now: float, want: int
) -> tuple[int, float]:
    """Take up to `want` tokens; return how many, and how many are left in the bucket.
    `sql`: the database's spelling (its engine's ``sql``)."""
    connection = session.connection()
    values = dict(bucket_values(policy), now=now, want=want)
    statement = _take_statement(sql)
    row = connection.execute(statement, values).first()
    if row is None:  # the first claim ever
        _create_bucket(session, now)
        row = connection.execute(statement, values).first()
    return int(row.taken), float(row.tokens)


def _create_bucket(session: Session, now: float) -> None:
    session.connection().execute(_CREATE_BUCKET, new_bucket_values(now))


def new_bucket_values(now: float) -> dict[str, float | str]:
    """The row of the bucket the first claim ever makes at `now` (empty: ``tb.start``)."""
    bucket = tb.start(now)
    return dict(name=BUCKET, tokens=bucket.tokens, refilled_at=bucket.refilled_at)


def give_back(session: Session, policy: tb.BucketPolicy, tokens: int) -> None:
    """Return tokens a claim took and did not lease (the bucket holds at most its burst)."""
    if tokens > 0:
        budget = _BUDGET.c
        refunded = budget.tokens + tokens
        session.connection().execute(
            update(_BUDGET)
            .where(budget.name == BUCKET)
            .values(tokens=case((refunded > policy.burst, policy.burst), else_=refunded))
        )


def lock_budget(session: Session, now: float) -> None:
    """Make concurrent claims take turns until this one commits (the quota's count)."""
    _create_if_missing = update(_BUDGET).where(_BUDGET.c.name == BUCKET).values(name=_BUDGET.c.name)
    if session.connection().execute(_create_if_missing).rowcount == 0:
        _create_bucket(session, now)
        session.connection().execute(_create_if_missing)


def halve_rate(connection: Connection, sql: SqlKit, now: float) -> bool:
    """The provider throttled a send: halve the shared rate (at most once a second); the
    caller commits. `sql`: the database's spelling (its engine's ``sql``)."""
    return connection.execute(_halve_statement(sql), halving_values(now)).rowcount == 1


def halving_values(now: float) -> dict[str, float | str]:
    """What the statement that halves the rate at `now` binds."""
    return dict(
        name=BUCKET,
        now=now,
        min_factor=tb.MIN_FACTOR,
        every=tb.HALVE_AT_MOST_EVERY_SECONDS,
        hold=tb.HOLD_SECONDS,
        step=tb.STEP_SECONDS,
        step_fraction=tb.STEP_FRACTION,
    )


def read_bucket(session: Session) -> tb.Bucket | None:
    """The bucket as last written (refill it to now with the core), or None before any claim."""
    budget = _BUDGET.c
    query = select(budget.tokens, budget.refilled_at, budget.factor, budget.slowed_at)
    row = session.connection().execute(query.where(budget.name == BUCKET)).first()
    return tb.Bucket(*row) if row is not None else None


def sent_since(session: Session, since: float) -> int:
    """Messages counted from the hour holding `since` on (a window up to an hour longer)."""
    first_hour = hour_of(since)
    query = select(func.coalesce(func.sum(_COUNT.c.sent), 0))
    return int(
        session.connection().execute(query.where(_COUNT.c.hour_start >= first_hour)).scalar()
    )


def oldest_hour_since(session: Session, since: float) -> int | None:
    """The start of the oldest counted hour in the window (it leaves the window first)."""
    first_hour = int(since // HOUR) * HOUR
    query = select(func.min(_COUNT.c.hour_start)).where(_COUNT.c.hour_start >= first_hour)
    return session.connection().execute(query.where(_COUNT.c.sent > 0)).scalar()


def hour_of(at: float) -> int:
    """The start of the hour holding `at` (seconds since the epoch)."""
    return int(at // HOUR) * HOUR


def count_sent(session: Session, now: float, sent: int) -> None:
    """Add `sent` to the count of the hour holding `now`; forget hours older than two days."""
    if sent <= 0:
        return
    connection = session.connection()
    hour = hour_of(now)
    moved = connection.execute(
        update(_COUNT).where(_COUNT.c.hour_start == hour).values(sent=_COUNT.c.sent + sent)
    )
    if moved.rowcount == 0:
        connection.execute(insert(_COUNT).values(hour_start=hour, sent=sent))
        connection.execute(_COUNT.delete().where(_COUNT.c.hour_start < hour - KEPT_HOURS * HOUR))
