"""The PostgreSQL engine's one pool of psycopg connections: the claim's transactions
(SQLAlchemy's session on a borrowed connection) and the marks and records share it, a
transaction is a transaction though a mark left its connection in autocommit, and a
connection the server dropped while idle in the pool fails the one transaction that
borrowed it (the worker says the database was lost) and is not lent again."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.support.claim_steps import on_engine

PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
BACKEND_PID = "SELECT pg_backend_pid()"


def backend_pid(session) -> int:
    return session.execute(text(BACKEND_PID)).scalar_one()


def pid_and_transaction(session) -> tuple[int, bool]:
    """The session's backend, and whether its statements share one transaction (a txid
    assigned by one statement is still assigned at the next: not autocommit)."""
    session.execute(text("SELECT txid_current()"))
    assigned = session.execute(text("SELECT txid_current_if_assigned()")).scalar_one()
    return backend_pid(session), assigned is not None


@PG
def test_the_claim_and_the_marks_share_one_pool_and_keep_their_modes(engine):
    async def use(store):
        _, [(mark_pid,)] = await store._run(BACKEND_PID, {}, "pid")  # autocommit
        return mark_pid, await store.in_transaction(pid_and_transaction)

    mark_pid, (claim_pid, transactional) = on_engine(engine, use)
    assert claim_pid == mark_pid, "the claim borrowed the connection the mark gave back"
    assert transactional, "the claim's statements share one transaction"


@PG
def test_a_connection_dropped_in_the_pool_fails_its_transaction_and_is_not_lent_again(engine):
    async def use(store):
        lost = await store.in_transaction(backend_pid)
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": lost})
            admin.commit()
        with pytest.raises(DBAPIError):
            await store.in_transaction(backend_pid)
        return lost, await store.in_transaction(backend_pid)

    lost, fresh = on_engine(engine, use)
    assert fresh != lost
