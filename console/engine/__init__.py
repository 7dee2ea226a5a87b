"""The send path's database work behind one interface, one implementation a database.

The database is chosen once (``engine_for``); the worker then only calls what an
``Engine`` offers and never asks which database it is on.
``sqlite`` works in the event loop's thread (SQLite is a file: no round trip to wait
for); ``postgres`` awaits psycopg's own async connections, so the other sends go on while
PostgreSQL answers.

Both keep the same promises: the claim locks due intents so that no two workers lease
one; the mark commits before it returns and is refused when the recipient is suppressed
or the attempt was swept; each record is a compare-and-set on its intent's lease token,
so a stale worker changes nothing.

The claim runs in one transaction of the engine (``claiming``), on its steps
(``ClaimSteps``); the sweep, the give-back, the heartbeat, the marks, the records and the
writes an outcome calls for are the engine's own operations, each committed. Only the
application's eligibility check and the matching of early provider events take the
store's ``Session`` (``in_session``).
"""

from __future__ import annotations

from sqlalchemy import Engine as DatabaseEngine

from console.engine.base import SUPPRESSED, SWEPT, ClaimSteps, Engine

__all__ = ["SUPPRESSED", "SWEPT", "ClaimSteps", "Engine", "engine_for"]


def engine_for(database: DatabaseEngine, connections: int = 1) -> Engine:
    """The engine of `database`; `connections`: the most its marks and records may use at
    once on PostgreSQL, and the most records written in one transaction (SQLite writes on
    one connection)."""
    if database.dialect.name == "postgresql":
        from console.engine.postgres import PostgresEngine  # psycopg: only here

        return PostgresEngine(database, connections)
    from console.engine.sqlite import SqliteEngine

    return SqliteEngine(database, connections)
