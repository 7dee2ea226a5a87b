"""The writes of the send loop between the claim and the next claim: the ``data_sent`` mark
before each body, and the compare-and-set records after each reply.

The database is chosen once (``send_writes_for``). Each implementation keeps its own
connections for the batch and gives them back at ``end_batch``:

- ``SqliteSendWrites`` (here): SQLite is a file in this process, a write is local work,
  so each runs at once in the event loop's thread, one record a statement;
- ``PostgresSendWrites`` (``send_writes_postgres``): each write awaited on psycopg's
  async connection, so the other connections' sends go on while PostgreSQL answers,
  and several records go in one statement.

``in_session`` runs ``work(session, *args)`` in a session of its own (the claims, the
give-backs, housekeeping: each commits what it does). ``mark`` answers None when the
body may leave, else why not (``SUPPRESSED``: the
recipient was put on the suppression list after the claim; ``SWEPT``: the lease-expiry
sweep took the attempt back). ``record`` writes a group of finished attempts through the
``OutcomeWriter`` and answers, for each, whether it was recorded (False: this worker's
lease was lost).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from console.store import attempt_records, suppression_lookup

if TYPE_CHECKING:
    from console.worker.outcome_writer import OutcomeWriter
    from console.worker.tick import FinishedAttempt

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused
T = TypeVar("T")


class SendWrites(Protocol):
    """The marks and records of one worker, on the database it runs on."""

    group_size: int  # the most records one ``record`` call writes in one statement
    concurrent_claims: bool  # whether the next claim may run while the records are written

    async def mark(self, attempt_id: int, recipient: str) -> str | None: ...

    async def record(
        self, outcomes: Sequence[FinishedAttempt], writer: OutcomeWriter
    ) -> list[bool]: ...

    async def in_session(self, work: Callable[..., T], *args: Any) -> T: ...

    async def end_batch(self) -> None: ...

    async def close(self) -> None: ...


def send_writes_for(engine: Engine, group_size: int, connections: int = 1) -> SendWrites:
    """The send writes for the database of `engine`: `group_size` records a statement at
    most, marks for `connections` transport connections at once."""
    if engine.dialect.name == "postgresql":
        from console.store.send_writes_postgres import PostgresSendWrites  # psycopg's async

        return PostgresSendWrites(engine, group_size, connections)
    return SqliteSendWrites(engine)


def why_refused(connection: Connection, recipient: str) -> str:
    """A mark changed no row: the recipient was suppressed, or the sweep took the attempt."""
    return SUPPRESSED if suppression_lookup.is_suppressed_now(connection, recipient) else SWEPT


class SqliteSendWrites:
    """SQLite: every write at once, in the event loop's thread, on one connection a batch."""

    group_size = 1
    concurrent_claims = False  # one writer: a claim beside the records would wait for them

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._connection: Connection | None = None

    def _here(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._engine.connect()
        return self._connection

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        connection = self._here()
        try:
            forms = suppression_lookup.recipient_forms(recipient)
            if attempt_records.mark_data_sent_unless_suppressed(connection, attempt_id, forms):
                return None
            return why_refused(connection, recipient)
        except BaseException:
            self._discard()
            raise

    async def record(
        self, outcomes: Sequence[FinishedAttempt], writer: OutcomeWriter
    ) -> list[bool]:
        connection = self._here()
        try:
            return [writer.write(connection, outcome) for outcome in outcomes]
        except BaseException:
            self._discard()
            raise

    async def in_session(self, work: Callable[..., T], *args: Any) -> T:
        with Session(self._engine, expire_on_commit=False) as session:
            return work(session, *args)

    def _discard(self) -> None:
        """After an error: roll back and start the next write on a fresh connection."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def end_batch(self) -> None:
        self._discard()

    async def close(self) -> None:
        self._discard()
