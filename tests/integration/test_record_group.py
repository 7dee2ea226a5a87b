"""Outcomes recorded together (PostgreSQL next door): several T2 records in one statement.

What must not change: each record is the compare-and-set of its own lease (a stale one
is left as it is, its attempt unfinished), a record in a group writes exactly what it
writes alone, every intent goes once; what changes is how many statements carry them.
SQLite, a database further away and ``CONSOLE_RECORD_GROUP=1`` record each alone.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from sqlalchemy import func, select

from console.core.send_result import SendResult
from console.models import Attempt, Intent, Suppression
from console.store import records
from console.store.database import make_engine
from console.store.pg_socket import SocketRecords
from console.store.threads import GROUP_WAIT_SECONDS, SerialWrites
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
from console.worker.settings import WorkerSettings
from tests.support.claim_steps import T0, lease_all, load, lock, queue, seconds
from tests.support.orders import enqueue_orders
from tests.support.record_checks import outcomes_of_each_kind, row_values

PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)


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
        recorded = records.record_all(connection, values)
    finally:
        connection.close()

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
    connection = records.writer(engine)
    try:
        recorded = records.record_all(connection, values)
        assert records.record_all(connection, values) == set(), "recorded once"
    finally:
        connection.close()

    assert recorded == {held[0].attempt_id, held[2].attempt_id}
    intent, [attempt] = load(session_factory, intent_ids[1])
    assert (intent.status, intent.lease_token) == (SENDING, held[1].lease_token)
    assert (attempt.stage, attempt.finished_at, attempt.outcome) == (CLAIMED, None, None)
    for intent_id in (intent_ids[0], intent_ids[2]):
        assert load(session_factory, intent_id)[0].status == SUBMITTED


def test_record_all_needs_postgresqls_autocommit_connection(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    with engine.connect() as connection, pytest.raises(ValueError, match="PostgreSQL"):
        records.record_all(connection, [])
    engine.dispose()


# --- SerialWrites: who waits for whom ---


def grouping_writes(engine, group: int, inline: bool = True):
    """SerialWrites with `group`, and the list of item lists its write function got."""
    writes = SerialWrites(engine, threads=4, group=group)
    writes.run_inline(inline)
    calls: list[list[int]] = []
    return writes, calls, lambda connection, items: calls.append(list(items))


@pytest.mark.postgres
def test_next_door_records_wait_for_a_full_group_or_a_moment_then_go_in_one_call(postgres_url):
    engine = make_engine(postgres_url)
    writes, calls, write_all = grouping_writes(engine, group=3)

    async def batch() -> None:
        for number in range(3):
            writes.post_grouped(write_all, number)
        await asyncio.sleep(0)
        assert calls == [[0, 1, 2]], "a full group goes at the next turn of the loop"
        writes.post_grouped(write_all, 3)
        await asyncio.sleep(GROUP_WAIT_SECONDS / 2)
        assert calls == [[0, 1, 2]], "a group not yet full waits"
        await asyncio.sleep(GROUP_WAIT_SECONDS)
        assert calls == [[0, 1, 2], [3]], "then goes as it is"
        writes.post_grouped(write_all, 4)
        writes.post(lambda connection: calls.append(["alone"]))
        writes.post_grouped(write_all, 5)
        await writes.drain()  # the end of the batch: nothing waits

    asyncio.run(batch())
    assert calls == [[0, 1, 2], [3], [4], ["alone"], [5]], "in order, a plain write between"
    writes.shutdown()
    engine.dispose()


def socket_writes(postgres_url):
    """Writes next door in groups of 2 whose form on the socket (`on_socket`) is answered
    once `answered` is set (item 99: an error); `calls` says what was sent, answered."""
    engine = make_engine(postgres_url)
    writes, calls, write_all = grouping_writes(engine, group=2)
    answered = asyncio.Event()

    async def on_socket(connection, items) -> None:
        calls.append(["sent", *items])
        await answered.wait()  # the database has not answered yet
        if 99 in items:
            raise RuntimeError("the statement failed")
        calls.append(["answered", *items])

    return engine, writes, calls, write_all, answered, on_socket


@pytest.mark.postgres
def test_a_group_on_the_socket_holds_back_the_writes_after_it_until_answered(postgres_url):
    engine, writes, calls, write_all, answered, on_socket = socket_writes(postgres_url)

    async def batch() -> None:
        writes.post_grouped(write_all, 0, on_socket)
        writes.post_grouped(write_all, 1, on_socket)
        writes.post(lambda connection: calls.append(["plain"]))
        writes.post_grouped(write_all, 2, on_socket)
        writes.post_grouped(write_all, 3, on_socket)
        for _ in range(5):
            await asyncio.sleep(0)  # the loop goes on while the first group waits
        assert calls == [["sent", 0, 1]], "nothing after it runs before its answer"
        answered.set()
        await writes.drain()
        writes.post_grouped(write_all, 99, on_socket)
        with pytest.raises(RuntimeError, match="failed"):
            await writes.drain()

    asyncio.run(batch())
    assert calls[1:4] == [["answered", 0, 1], ["plain"], ["sent", 2, 3]]
    assert calls[4:] == [["answered", 2, 3], ["sent", 99]]
    writes.shutdown()
    engine.dispose()


@pytest.mark.postgres
def test_behind_a_group_on_the_socket_a_full_group_makes_the_senders_wait(postgres_url):
    engine, writes, calls, write_all, answered, on_socket = socket_writes(postgres_url)

    async def batch() -> None:
        for number in range(2):
            writes.post_grouped(write_all, number, on_socket)
        await asyncio.sleep(0)
        await asyncio.wait_for(writes.room(), 1)  # one group out, none behind it: room
        for number in range(2, 4):
            writes.post_grouped(write_all, number, on_socket)
        waiting = asyncio.ensure_future(writes.room())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done(), "a full group waits behind the one out: no room"
        answered.set()
        await asyncio.wait_for(waiting, 1)
        assert ["sent", 2, 3] in calls, "the group behind went out, making room"
        await writes.drain()

    asyncio.run(batch())
    writes.shutdown()
    engine.dispose()


@pytest.mark.postgres
def test_a_group_on_the_socket_cancelled_stays_cancelled_and_starts_nothing_more(postgres_url):
    engine, writes, calls, write_all, _, on_socket = socket_writes(postgres_url)  # unanswered

    async def batch() -> None:
        for number in range(4):
            writes.post_grouped(write_all, number, on_socket)
        while not calls:
            await asyncio.sleep(0)
        writes._on_socket.cancel()
        await asyncio.sleep(0.01)

    asyncio.run(batch())
    assert calls == [["sent", 0, 1]], "the group behind it was not started on a closing loop"
    assert writes._on_socket is None
    engine.dispose()


@pytest.mark.postgres
def test_a_far_database_or_a_group_of_one_records_each_alone(postgres_url):
    engine = make_engine(postgres_url)
    for group, inline in ((3, False), (1, True)):
        writes, calls, write_all = grouping_writes(engine, group=group, inline=inline)

        async def batch(writes=writes, write_all=write_all) -> None:
            for number in range(3):
                writes.post_grouped(write_all, number)
            await writes.drain()

        asyncio.run(batch())
        assert sorted(calls) == [[0], [1], [2]], (group, inline)
        writes.shutdown()
    engine.dispose()


def test_on_sqlite_each_record_goes_alone(tmp_path):
    writes, calls, write_all = grouping_writes(make_engine(f"sqlite:///{tmp_path / 'g.db'}"), 3)

    async def batch() -> None:
        for number in range(3):
            writes.post_grouped(write_all, number)
        await writes.drain()

    asyncio.run(batch())
    assert calls == [[0], [1], [2]]
    writes.shutdown()


# --- the worker ---


@pytest.fixture
def record_sizes(monkeypatch) -> list[int]:
    """How many records each statement of several carried (``attempt_records.record_all``,
    ``SocketRecords.record_all``)."""
    sizes: list[int] = []
    record_all = records.record_all

    def counted(connection, records):
        sizes.append(len(records))
        return record_all(connection, records)

    monkeypatch.setattr(records, "record_all", counted)
    on_socket = SocketRecords.record_all  # the event loop's records next door

    async def counted_on_socket(self, records):
        sizes.append(len(records))
        return await on_socket(self, records)

    monkeypatch.setattr(SocketRecords, "record_all", counted_on_socket)
    return sizes


def next_door(worker) -> None:
    """As if the last marks had come back within 0.2 ms (a busy test machine may be slower):
    the worker's next batch records in the event loop's thread, together."""
    worker._stages._note_mark_seconds(0.0002)


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

    next_door(worker)
    while worker.run_once().claimed:
        next_door(worker)

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
    next_door(worker)

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
