"""Outcomes recorded together (PostgreSQL next door): several T2 records in one statement.

What must not change: each record is the compare-and-set of its own lease (a stale one
is left as it is, its attempt unfinished), a record in a group writes exactly what it
writes alone, every intent goes once; what changes is how many statements carry them.
SQLite, a database further away and ``CONSOLE_RECORD_GROUP=1`` record each alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import pytest
from sqlalchemy import func, select

from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.models import Attempt, Intent, Suppression
from console.store import attempt_records
from console.store.database import make_engine
from console.store.record_arrays import RECORD_BATCH_IF_MOVED, as_arrays
from console.store.send_writes import send_writes_for
from console.store.send_writes_postgres import PostgresSendWrites
from console.transports.memory import MemoryTransport
from console.vocabulary import (
    ACCEPTED,
    CLAIMED,
    DATA_SENT,
    ENVELOPE,
    FAILED,
    PENDING,
    PERMANENT,
    REPLY_READ,
    SENDING,
    SUBMITTED,
    TRANSIENT,
)
from console.worker.record_queue import RecordQueue
from console.worker.settings import WorkerSettings
from tests.integration.test_claim_queries import T0, lease_all, load, lock, queue, seconds
from tests.support.orders import enqueue_orders

PG = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

INTENT_COLUMNS = (
    "status",
    "status_reason",
    "next_attempt_at",
    "submitted_at",
    "provider_message_id",
    "lease_token",
    "lease_expires_at",
    "updated_at",
    "attempt_count",
)
ATTEMPT_COLUMNS = (
    "stage",
    "finished_at",
    "outcome",
    "reply_code",
    "enhanced_status",
    "reply_text",
    "error",
    "provider_message_id",
    "duration_ms",
)


def outcomes_of_each_kind(now: dt.datetime):
    """(result, classification, decision): accepted, a retry, a permanent refusal."""
    return [
        (
            SendResult(
                REPLY_READ,
                code=250,
                reply_text="2.0.0 Ok: queued as Q7",
                provider_message_id="Q7",
                duration_ms=12,
            ),
            Classification(ACCEPTED, "accepted"),
            Decision(SUBMITTED),
        ),
        (
            SendResult(REPLY_READ, code=451, reply_text="4.3.0 try later", duration_ms=30),
            Classification(TRANSIENT, "temporary failure"),
            Decision(PENDING, "retry: 451 4.3.0 try later", now + seconds(45)),
        ),
        (
            SendResult(DATA_SENT, code=550, reply_text="5.1.1 no such user", error="x" * 1500),
            Classification(PERMANENT, "refused"),
            Decision(FAILED, "refused: 550"),
        ),
    ]


def row_values(session_factory, intent_id: int) -> tuple[tuple, tuple]:
    intent, [attempt] = load(session_factory, intent_id)
    return (
        tuple(getattr(intent, name) for name in INTENT_COLUMNS),
        tuple(getattr(attempt, name) for name in ATTEMPT_COLUMNS),
    )


def record_all(connection, records) -> set[int]:
    """The records' statement as the PostgreSQL send writes run it: the attempt ids recorded."""
    rows = connection.execute(RECORD_BATCH_IF_MOVED, as_arrays(records))
    return {attempt_id for (attempt_id,) in rows}


@PG
def test_one_statement_writes_what_the_records_one_by_one_write(engine, session_factory, session):
    kinds = outcomes_of_each_kind(T0 + seconds(3))
    intent_ids = [queue(session_factory) for _ in range(2 * len(kinds))]
    held = lease_all(session, lock(session))
    session.commit()
    alone, together = held[: len(kinds)], held[len(kinds) :]
    now = T0 + seconds(3)
    connection = attempt_records.writer(engine)
    try:
        for claim, (result, classification, decision) in zip(alone, kinds, strict=True):
            assert attempt_records.record_outcome(
                connection, claim, result, classification, decision, now
            )
        values = [
            attempt_records.record_values(claim, result, classification, decision, now)
            for claim, (result, classification, decision) in zip(together, kinds, strict=True)
        ]
        recorded = record_all(connection, values)
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
        attempt_records.record_values(claim, result, classification, decision, now)
        for claim in (held[0], swept, held[2])
    ]
    connection = attempt_records.writer(engine)
    try:
        recorded = record_all(connection, values)
        assert record_all(connection, values) == set(), "recorded once"
    finally:
        connection.close()

    assert recorded == {held[0].attempt_id, held[2].attempt_id}
    intent, [attempt] = load(session_factory, intent_ids[1])
    assert (intent.status, intent.lease_token) == (SENDING, held[1].lease_token)
    assert (attempt.stage, attempt.finished_at, attempt.outcome) == (CLAIMED, None, None)
    for intent_id in (intent_ids[0], intent_ids[2]):
        assert load(session_factory, intent_id)[0].status == SUBMITTED


# --- RecordQueue: who waits for whom ---


def recording_queue(group: int, answered: asyncio.Event | None = None):
    """A RecordQueue in groups of `group` whose writes wait for `answered` (when given)
    and fail on item 99; `calls` says what was sent and answered."""
    calls: list[list] = []

    async def write_group(items) -> None:
        calls.append(["sent", *items])
        if answered is not None:
            await answered.wait()  # the database has not answered yet
        if 99 in items:
            raise RuntimeError("the statement failed")
        calls.append(["answered", *items])

    return RecordQueue(write_group, group), calls


def test_records_posted_while_one_is_out_go_together_and_in_order():
    async def batch():
        answered = asyncio.Event()
        queue, calls = recording_queue(3, answered)
        queue.post(0)
        await asyncio.sleep(0)
        for number in range(1, 6):
            queue.post(number)  # while the first is out
        assert queue.waiting == 6
        answered.set()
        await queue.drain()
        assert queue.waiting == 0
        return calls

    calls = asyncio.run(batch())
    sent = [call[1:] for call in calls if call[0] == "sent"]
    assert sent == [[0], [1, 2, 3], [4, 5]], "in order, a group's worth at most"


def test_behind_a_group_out_a_full_group_makes_the_senders_wait():
    async def batch():
        answered = asyncio.Event()
        queue, calls = recording_queue(2, answered)
        queue.post(0)
        await asyncio.sleep(0)
        await asyncio.wait_for(queue.room(), 1)  # one out, none behind it: room
        queue.post(1)
        queue.post(2)
        waiting = asyncio.ensure_future(queue.room())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done(), "a full group waits behind the one out: no room"
        answered.set()
        await asyncio.wait_for(waiting, 1)
        await queue.drain()
        return calls

    assert ["sent", 1, 2] in asyncio.run(batch())


def test_an_error_reaches_drain_and_the_records_behind_it_are_still_written():
    async def batch():
        queue, calls = recording_queue(1)
        for number in (1, 99, 2):
            queue.post(number)
        with pytest.raises(RuntimeError, match="failed"):
            await queue.drain()
        await queue.drain()  # raised once
        return calls

    calls = asyncio.run(batch())
    assert ["answered", 2] in calls and ["answered", 1] in calls


def test_on_sqlite_each_record_goes_alone(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'g.db'}")
    assert send_writes_for(engine, 8).group_size == 1
    engine.dispose()


# --- the worker ---


@pytest.fixture
def record_sizes(monkeypatch) -> list[int]:
    """How many records each statement of the PostgreSQL send writes carried."""
    sizes: list[int] = []
    record_all = PostgresSendWrites._record_all

    async def counted(statement, connection, records):
        sizes.append(len(records))
        return await record_all(statement, connection, records)

    monkeypatch.setattr(PostgresSendWrites, "_record_all", staticmethod(counted))
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

    assert sum(record_sizes) == 3, "accepted, retried, refused recorded; the session refusal held"
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
