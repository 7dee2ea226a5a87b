"""A claim's round trips: with every breaker closed, the breakers' read, the due intents'
lock, the suppression check and the lease share one transaction, and the lease is one
statement on PostgreSQL (next door each round trip is a good part of the claim)."""

from __future__ import annotations

from sqlalchemy import event

from console.transports.memory import MemoryTransport
from console.vocabulary import LANES
from console.worker.guard import GuardPolicy
from tests.support.backlog import insert_bulk_backlog


def statements_of_a_claim(engine, claim) -> tuple[list[str], list[str]]:
    """Run `claim`; the statements it sent and the transaction ends it asked for."""
    statements, ends = [], []

    def sent(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement.lstrip().split(None, 1)[0].upper())

    listeners = [
        ("before_cursor_execute", sent),
        ("commit", lambda conn: ends.append("COMMIT")),
        ("rollback", lambda conn: ends.append("ROLLBACK")),
    ]
    for name, listener in listeners:
        event.listen(engine, name, listener)
    try:
        claim()
    finally:
        for name, listener in listeners:
            event.remove(engine, name, listener)
    return statements, ends


def transactions_engine(worker):
    """The engine whose events the worker's transactions fire: on PostgreSQL its asyncio
    engine's (``console.engine.postgres``), on SQLite the worker's own."""
    asyncio_engine = getattr(worker._engine, "_async_engine", None)
    if asyncio_engine is None:
        return worker.session_factory.kw["bind"]
    return asyncio_engine.sync_engine


def test_a_claim_with_every_breaker_closed_is_one_transaction(session_factory, make_worker, clock):
    insert_bulk_backlog(session_factory, 5)
    worker = make_worker(MemoryTransport(), guard_policy=GuardPolicy())  # as in production
    engine = transactions_engine(worker)

    claim = lambda: worker._runner.run(worker._claimer.claim(clock()))  # noqa: E731
    statements, ends = statements_of_a_claim(engine, claim)

    assert ends == ["COMMIT"], "the breakers' read ends no transaction of its own"
    if engine.dialect.name == "postgresql":
        # breakers, a lock per lane and kind (retries, first attempts), suppressions, then
        # the lease: intents and attempts
        assert statements == ["SELECT"] * (1 + 2 * len(LANES) + 1) + ["WITH"]
    else:  # SQLite: a statement for the intents, one for the attempts
        assert statements[0] == "SELECT" and statements[-2:] == ["UPDATE", "INSERT"]
