"""The compare-and-set record finds its intent by primary key, whatever the statistics say.

psycopg prepares a statement run five times; PostgreSQL then plans it once for any
values (a generic plan). On a table just filled, never analysed, every index's
estimate is one row: for the record's ``status = 'sending'`` the planner chose a
status index and read every `sending` row of it (and their dead versions) for each
record, a cost that grows with the intents leased by all the workers.
"""

from __future__ import annotations

import datetime as dt
import re

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from console.models import utcnow
from console.store import statements as s
from console.store.database import make_engine, make_session_factory
from tests.support.orders import enqueue_orders

pytestmark = pytest.mark.postgres

INTENTS, LEASED = 3000, 300


def positional(statement) -> tuple[str, list[str]]:
    """The statement's PostgreSQL text with $1, $2, ... and the names in their order."""
    sql = str(statement.compile(dialect=postgresql.dialect()))
    names: list[str] = []

    def number(match: re.Match) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql), names


def generic_plan(url: str, statement, values: dict) -> str:
    """EXPLAIN of the generic plan PostgreSQL keeps for `statement` once prepared."""
    sql, names = positional(statement)
    arguments = [values.get(name) for name in names]
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, cursor_factory=psycopg.ClientCursor) as connection:
        connection.execute("SET plan_cache_mode = force_generic_plan")
        connection.execute(f"PREPARE send_statement AS {sql}")
        placeholders = ", ".join(["%s"] * len(arguments))
        rows = connection.execute(f"EXPLAIN EXECUTE send_statement({placeholders})", arguments)
        return "\n".join(row[0] for row in rows)


@pytest.fixture
def leased_backlog(postgres_url):
    """A table just filled, a tenth of it leased, as workers draining a backlog see it."""
    engine = make_engine(postgres_url)
    enqueue_orders(make_session_factory(engine), [f"c{i}@example.com" for i in range(INTENTS)])
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE email_intent SET status = 'sending', lease_token = 'token-' || id,"
                " lease_expires_at = now() + interval '1 minute' WHERE id <= :leased"
            ),
            {"leased": LEASED},
        )
    engine.dispose()
    return postgres_url


def intent_scans(plan: str) -> list[str]:
    return [line.strip() for line in plan.splitlines() if "Scan" in line and "email_intent" in line]


def test_the_record_statement_finds_the_intent_by_its_primary_key(leased_backlog):
    now = utcnow()
    values = {
        "b_id": LEASED // 2,
        "b_token": f"token-{LEASED // 2}",
        "b_status": "submitted",
        "b_now": now,
        "b_submitted_at": now,
        "b_attempt_id": 1,
        "b_stage": "reply_read",
        "b_outcome": "accepted",
        "b_reply_code": 250,
        "status_1": "sending",
        "b_next_attempt_at": now + dt.timedelta(minutes=1),
    }
    plan = generic_plan(leased_backlog, s.RECORD_IF_MOVED, values)
    [scan] = intent_scans(plan)
    assert scan.startswith("->  Index Scan using pk_email_intent on email_intent"), plan
