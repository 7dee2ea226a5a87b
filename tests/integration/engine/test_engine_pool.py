"""The PostgreSQL engine's one pool of psycopg connections: the claim's transactions and
the marks and records share it, a claim is a transaction though a mark left its connection
in autocommit, and a connection the server dropped while idle in the pool fails the one
transaction that borrowed it (the worker says the database was lost) and is not lent
again."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.support.claim_steps import on_engine

PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
BACKEND_PID = "SELECT pg_backend_pid()"


async def one_value(connection, sql: str):
    [(value,)] = await (await connection.execute(sql)).fetchall()
    return value


async def claim_pid_and_transaction(store) -> tuple[int, bool]:
    """The backend of a claim's connection, and whether its statements share one
    transaction (a txid assigned by one statement is still assigned at the next)."""
    async with store.claiming() as steps:
        connection = steps._connection
        await connection.execute("SELECT txid_current()")
        assigned = await one_value(connection, "SELECT txid_current_if_assigned()")
        return await one_value(connection, BACKEND_PID), assigned is not None


async def claim_pid(store) -> int:
    pid, _ = await claim_pid_and_transaction(store)
    return pid


@PG
def test_the_claim_and_the_marks_share_one_pool_and_keep_their_modes(engine):
    async def use(store):
        _, [(mark_pid,)] = await store._run(BACKEND_PID, {}, "pid")  # autocommit
        return mark_pid, await claim_pid_and_transaction(store)

    mark_pid, (claim_pid_seen, transactional) = on_engine(engine, use)
    assert claim_pid_seen == mark_pid, "the claim borrowed the connection the mark gave back"
    assert transactional, "the claim's statements share one transaction"


@PG
def test_a_connection_dropped_in_the_pool_fails_its_transaction_and_is_not_lent_again(engine):
    async def use(store):
        lost = await claim_pid(store)
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": lost})
            admin.commit()
        with pytest.raises(DBAPIError):
            await claim_pid(store)
        return lost, await claim_pid(store)

    lost, fresh = on_engine(engine, use)
    assert fresh != lost
