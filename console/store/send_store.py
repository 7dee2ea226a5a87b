"""The send loop's database work behind one interface, whatever the database: the claim's and
the housekeeping's transactions, the ``data_sent`` mark and the records of finished attempts.

The database is chosen once (``send_store_for``); the worker then only awaits what a
``SendStore`` offers. ``send_store_sqlite`` works in the event loop's thread (SQLite is a
file: no round trip to wait for). ``send_store_postgres`` awaits psycopg's own async
connection, so the other sends go on while PostgreSQL answers.

Both keep the same promises: the mark commits before it returns and is refused when the
recipient is suppressed or the attempt was swept; each record is a compare-and-set on its
intent's lease token, so a stale worker changes nothing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

T = TypeVar("T")

SUPPRESSED, SWEPT = "suppressed", "swept"  # why a mark was refused
# The round trips the database's distance is judged by (one timed between batches): the
# fastest of the last ones, so a slow one (a pause of the machine) does not count.
RECENT_ROUND_TRIPS = 32
# A database whose fastest recent round trip took longer than this is far (across a
# network): the worker then claims its next batch ahead (``worker.claim_ahead``). A
# database next door on a busy machine can answer a round trip in well over 0.5 ms;
# nearer than a millisecond, the claim ahead has nothing to win.
FAR_ROUND_TRIP_SECONDS = 0.001


class SendStore(Protocol):
    """What the send loop asks of the database: its transactions, the marks, the records."""

    group_size: int  # the most records one ``record_all`` carries
    claims_ahead: bool  # the next batch may be claimed while one is sent

    async def in_transaction(self, work: Callable[[Session], T]) -> T:
        """Run `work` with a session of its own and return what it returns; the session
        is closed after it, rolling back what `work` did not commit; it connects when
        `work` first uses it. The claim, the give-back, the housekeeping and what follows
        the records run here (their steps, and the application's eligibility checks,
        take a ``Session``)."""

    async def mark(self, attempt_id: int, recipient: str) -> str | None:
        """Commit that the body of `attempt_id` is about to leave: None; or, nothing marked,
        why not (``SUPPRESSED``: the recipient is on the list; ``SWEPT``: the lease was
        taken back)."""

    async def record_all(self, values: list[dict[str, Any]]) -> set[int]:
        """Record the outcomes (``records.record_values`` each), each only while its lease
        holds; committed on return. The ids of the attempts recorded."""

    @property
    def far(self) -> bool:
        """True when the database seems across a network (or its distance is not known)."""

    async def forget_connections(self) -> None:
        """After an error: the next write starts on fresh connections."""

    async def release(self) -> None:
        """Between batches: give back what the pool lends."""

    async def close(self) -> None:
        """The worker stops: close every connection."""


class RoundTrips:
    """The seconds of the last round trips; ``far`` judged by the fastest of them."""

    def __init__(self) -> None:
        self._recent: collections.deque[float] = collections.deque(maxlen=RECENT_ROUND_TRIPS)
        self.fastest: float | None = None

    def note(self, seconds: float) -> None:
        self._recent.append(seconds)
        self.fastest = min(self._recent)

    @property
    def far(self) -> bool:
        """Not yet known (no round trip timed) counts as far."""
        return self.fastest is None or self.fastest > FAR_ROUND_TRIP_SECONDS


def send_store_for(engine: Engine, group_size: int = 1, connections: int = 1) -> SendStore:
    """The send store of `engine`'s database; `group_size`: the records one PostgreSQL
    statement may carry, `connections`: the most its marks and records may use at once
    (SQLite records one at a time, on one connection)."""
    if engine.dialect.name == "postgresql":
        from console.store.send_store_postgres import PostgresSendStore  # psycopg: only here

        return PostgresSendStore(engine, group_size, connections)
    from console.store.send_store_sqlite import SqliteSendStore

    return SqliteSendStore(engine)
