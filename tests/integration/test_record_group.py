"""Outcomes recorded together (PostgreSQL): several T2 records in one statement.

What must not change: each record is the compare-and-set of its own lease (a stale one
is left as it is, its attempt unfinished), a record in a group writes exactly what it
writes alone, every intent goes once; what changes is how many statements carry them.
SQLite and ``CONSOLE_RECORD_GROUP=1`` record each alone (``test_record_queue``).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from sqlalchemy import func, select

from console.core.send_result import SendResult
from console.models import Attempt, Intent, Suppression
from console.store import records
from console.store.send_store import send_store_for
from console.store.send_store_postgres import PostgresSendStore
from console.transports.memory import MemoryTransport
from console.vocabulary import (
    ACCEPTED,
    CLAIMED,
    ENVELOPE,
    FAILED,
    PENDING,
    REPLY_READ,
    SENDING,
    SUBMITTED,
)
from console.worker import record_queue
from console.worker.settings import WorkerSettings
from tests.support.claim_steps import T0, lease_all, load, lock, queue, seconds
from tests.support.orders import enqueue_orders
from tests.support.record_checks import outcomes_of_each_kind, row_values

PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


def record_on_store(engine, values) -> set[int]:
    """The PostgreSQL send store's ``record_all`` of `values`, on a store of its own."""

    async def recorded() -> set[int]:
        store = send_store_for(engine, group_size=len(values))
        try:
            return await store.record_all(values)
        finally:
            await store.close()

    return asyncio.run(recorded())


@PG
def test_one_statement_writes_what_the_records_one_by_one_write(engine, session_factory, session):
    kinds = outcomes_of_each_kind(T0 + seconds(3))
    intent_ids = [queue(session_factory) for _ in range(2 * len(kinds))]
    held = lease_all(session, lock(session))
    session.commit()
    alone, together = held[: len(kinds)], held[len(kinds) :]
    now = T0 + seconds(3)
    connection = records.writer(engine)
    try:
        for claim, (result, classification, decision) in zip(alone, kinds, strict=True):
            assert records.record_outcome(connection, claim, result, classification, decision, now)
        values = [
            records.record_values(claim, result, classification, decision, now)
            for claim, (result, classification, decision) in zip(together, kinds, strict=True)
        ]
    finally:
        connection.close()
    recorded = record_on_store(engine, values)

    assert recorded == {claim.attempt_id for claim in together}
    assert [claim.intent.id for claim in held] == intent_ids
    for one, other in zip(alone, together, strict=True):
        assert row_values(session_factory, one.intent.id) == row_values(
            session_factory, other.intent.id
        )
    statuses = [row_values(session_factory, claim.intent.id)[0][0] for claim in together]
    assert statuses == [SUBMITTED, PENDING, FAILED]


@PG
def test_a_record_whose_lease_was_taken_is_left_as_it_is_and_the_others_go(
    engine, session_factory, session
):
    intent_ids = [queue(session_factory) for _ in range(3)]
    held = lease_all(session, lock(session))
    session.commit()
    swept = dataclasses.replace(held[1], lease_token="a-lease-swept-meanwhile")
    result, classification, decision = outcomes_of_each_kind(T0)[0]
    now = T0 + seconds(2)
    values = [
        records.record_values(claim, result, classification, decision, now)
        for claim in (held[0], swept, held[2])
    ]
    recorded = record_on_store(engine, values)
    assert record_on_store(engine, values) == set(), "recorded once"

    assert recorded == {held[0].attempt_id, held[2].attempt_id}
    intent, [attempt] = load(session_factory, intent_ids[1])
    assert (intent.status, intent.lease_token) == (SENDING, held[1].lease_token)
    assert (attempt.stage, attempt.finished_at, attempt.outcome) == (CLAIMED, None, None)
    for intent_id in (intent_ids[0], intent_ids[2]):
        assert load(session_factory, intent_id)[0].status == SUBMITTED


# --- the worker ---


@pytest.fixture
def record_sizes(monkeypatch) -> list[int]:
    """How many records each statement of the PostgreSQL send store carried.

    A group not yet full waits for the batch's end instead of ``GROUP_WAIT_SECONDS``, so
    what goes together depends on the outcomes, not on how busy the machine is.
    """
    monkeypatch.setattr(record_queue, "GROUP_WAIT_SECONDS", 60.0)
    sizes: list[int] = []
    record_all = PostgresSendStore.record_all

    async def counted(self, values):
        sizes.append(len(values))
        return await record_all(self, values)

    monkeypatch.setattr(PostgresSendStore, "record_all", counted)
    return sizes


def test_by_default_two_records_a_connection_wait_for_each_other():
    settings = WorkerSettings(mail_from="a@example.com", retry=None)  # type: ignore[arg-type]
    per_connections = {
        n: dataclasses.replace(settings, concurrency=n).records_per_statement for n in (1, 2, 4)
    }
    assert per_connections == {1: 1, 2: 4, 4: 8}
    chosen = dataclasses.replace(settings, concurrency=4, record_group=1)
    assert chosen.records_per_statement == 1


@PG
def test_a_worker_with_four_connections_records_in_groups_and_sends_each_once(
    session_factory, make_worker, record_sizes
):
    recipients = [f"g{n}@example.com" for n in range(60)]
    enqueue_orders(session_factory, recipients)
    transport = MemoryTransport()
    worker = make_worker(transport, batch_size=20, concurrency=4)

    while worker.run_once().claimed:
        pass

    assert sorted(email.recipient for email in transport.sent) == sorted(recipients)
    with session_factory() as session:
        statuses = session.execute(select(Intent.status, func.count()).group_by(Intent.status))
        assert dict(statuses.all()) == {SUBMITTED: 60}
        finished = select(func.count()).where(Attempt.outcome == ACCEPTED)
        assert session.scalar(finished) == 60
    assert record_sizes and max(record_sizes) > 1, "records went together"
    assert max(record_sizes) <= 8, "at most two a connection"


@PG
def test_a_group_of_every_kind_of_outcome_writes_what_each_calls_for(
    session_factory, make_worker, record_sizes
):
    transport = MemoryTransport(
        {
            "retry@example.com": [SendResult(REPLY_READ, code=451, reply_text="4.3.0 later")],
            "gone@example.com": [
                SendResult(
                    ENVELOPE,
                    code=550,
                    reply_text="5.1.1 no such user",
                    error_type="SMTPRecipientRefused",
                )
            ],
            "refused@example.com": [
                SendResult(
                    ENVELOPE,
                    code=530,
                    reply_text="5.7.0 Authentication required",
                    error_type="SMTPSenderRefused",
                )
            ],
        }
    )
    worker = make_worker(transport, batch_size=10, concurrency=4)
    addresses = ["ok@example.com", "retry@example.com", "gone@example.com", "refused@example.com"]
    enqueue_orders(session_factory, [*addresses, "later@example.com"])

    report = worker.run_once()

    assert record_sizes == [3], "accepted, retried and refused together; the refused session alone"
    with session_factory() as session:
        rows = session.execute(select(Intent.recipient, Intent.status, Intent.attempt_count))
        by_recipient = {recipient: (status, count) for recipient, status, count in rows}
        suppressed = session.scalars(select(Suppression.recipient)).all()
    assert by_recipient == {
        "ok@example.com": (SUBMITTED, 1),
        "retry@example.com": (PENDING, 1),
        "gone@example.com": (FAILED, 1),
        "refused@example.com": (PENDING, 0),  # the session refused: waits, not charged
        "later@example.com": (PENDING, 0),  # its lane paused: given back
    }
    assert suppressed == ["gone@example.com"], "a mailbox the relay called unknown"
    assert report.statuses == {SUBMITTED: 1, PENDING: 2, FAILED: 1}
