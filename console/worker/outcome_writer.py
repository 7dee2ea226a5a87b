"""T2 and what follows it (console.store.threads says in which thread it runs).

For each finished attempt: record the outcome (compare-and-set on the lease), put a
mailbox the relay called unknown on the suppression list, feed the breaker and the
per-domain back-off, halve the shared send rate after a throttling reply, and raise
the alerts that name the relay's reply. A refusal of the session
(``Classification.blames_session``) is not recorded as an attempt: the lane's breaker
opens at once, the intent waits uncharged, an operator is told.

Records of one batch may run in several threads at once: the compare-and-set of each
needs nothing of the others, and what follows it (the breaker's memory, the shared
rate, suppressions, alerts) runs under one lock, one record at a time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from console.core.blame import THROTTLING
from console.core.classify import SMTPUTF8_NOT_OFFERED
from console.core.rejections import refuses_the_mailbox
from console.store import records, suppressions
from console.vocabulary import CLAIMED
from console.worker import relay_alerts
from console.worker.guard import SendGuard
from console.worker.send_budget import SendBudget
from console.worker.settings import WorkerSettings
from console.worker.tick import FinishedAttempt

if TYPE_CHECKING:
    from console.store.pg_socket import SocketRecords

log = logging.getLogger("console.worker.loop")


class OutcomeWriter:
    """Writes what each attempt's outcome calls for; each call is one unit of work."""

    def __init__(
        self,
        settings: WorkerSettings,
        guard: SendGuard | None,
        relay: str,
        budget: SendBudget | None = None,
    ) -> None:
        self.settings = settings
        self.guard = guard
        self.relay = relay
        self.budget = budget
        self._after_record = threading.Lock()  # what follows a record: one at a time
        self._socket_records: SocketRecords | None = None  # on the event loop's connection

    def write(self, connection: Connection, outcome: FinishedAttempt) -> bool:
        """Record `outcome`; False when this worker's lease was lost (a stale write)."""
        if outcome.classification.blames_session:
            with self._after_record:
                return self._hold_after_session_refusal(connection, outcome)
        claim, result, classification = outcome.claim, outcome.result, outcome.classification
        recorded = records.record_outcome(
            connection, claim, result, classification, outcome.decision, outcome.now
        )
        if not recorded:
            return False
        with self._after_record:
            self._after_recorded(connection, outcome)
        return True

    def write_all(self, connection: Connection, outcomes: list[FinishedAttempt]) -> list[bool]:
        """Record several outcomes, in one statement on PostgreSQL; ``write``'s answer for
        each. A refused session is held as ``write`` holds it, one at a time."""
        if len(outcomes) == 1:
            return [self.write(connection, outcomes[0])]
        values = _recordable(outcomes)
        recorded = records.record_all(connection, values) if values else set()
        return self._after_all(connection, outcomes, recorded)

    async def write_all_on_socket(
        self, connection: Connection, outcomes: list[FinishedAttempt]
    ) -> list[bool]:
        """``write_all`` with the records' statement on the socket of `connection`, the event
        loop's (PostgreSQL next door): the loop goes on sending while it is written."""
        from console.store.pg_socket import SocketRecords  # psycopg: PostgreSQL only

        statement = self._socket_records
        if statement is None or statement.connection is not connection:
            statement = self._socket_records = SocketRecords(connection)
        records = _recordable(outcomes)
        try:
            recorded = await statement.record_all(records) if records else set()
        except asyncio.CancelledError:
            statement.abandon()  # not given back to the pool mid-statement
            raise
        except Exception:
            self._socket_records = None  # its connection is closed
            raise
        return self._after_all(connection, outcomes, recorded)

    def _after_all(
        self, connection: Connection, outcomes: list[FinishedAttempt], recorded: set[int]
    ) -> list[bool]:
        """After the records of `outcomes` (the attempt ids of those `recorded`): a refused
        session held, what each recorded one calls for; ``write``'s answer for each."""
        written = []
        for outcome in outcomes:
            if outcome.classification.blames_session:
                written.append(self.write(connection, outcome))
                continue
            written.append(outcome.claim.attempt_id in recorded)
            if written[-1]:
                with self._after_record:
                    self._after_recorded(connection, outcome)
        return written

    def _after_recorded(self, connection: Connection, outcome: FinishedAttempt) -> None:
        """What a recorded outcome calls for beyond its record."""
        claim, result, classification = outcome.claim, outcome.result, outcome.classification
        throttled = classification.blamed == THROTTLING
        if throttled and self.budget:  # every worker slows down: the shared rate halves
            self.budget.throttled(connection, outcome.now)
        if self.settings.suppress_refused_mailboxes and refuses_the_mailbox(result, classification):
            suppressions.suppress_refused_mailbox(
                connection,
                recipient=claim.intent.recipient,
                reply=f"{result.code} {result.reply_text or ''}".strip(),
                attempt_id=claim.attempt_id,
                now=outcome.now,
            )
        with _SessionOnDemand(connection) as session:  # most outcomes write nothing more
            if result.error_type == SMTPUTF8_NOT_OFFERED:
                relay_alerts.raise_smtputf8_missing(session, relay=self.relay, now=outcome.now)
                session.commit()
            if self.guard:
                self.guard.after_outcome(
                    session,
                    lane=claim.intent.lane,
                    outcome=classification.outcome,
                    code=result.code,
                    reached_transport=result.stage != CLAIMED,
                    now=outcome.now,
                    deferral=outcome.deferral,
                    message_level=classification.blamed == "message",
                    throttled=throttled,
                )

    def _hold_after_session_refusal(self, connection: Connection, outcome: FinishedAttempt):
        """Open the lane's breaker, give the intent back uncharged, raise the alert."""
        claim, result, now = outcome.claim, outcome.result, outcome.now
        lane = claim.intent.lane
        reply = f"{result.code} {result.reply_text or ''}".strip()
        due_at = outcome.decision.next_attempt_at or now
        with Session(bind=connection) as session:
            if self.guard:
                due_at = max(due_at, self.guard.trip(session, lane, now, result.code))
            released = records.release_refused(
                session.connection(), claim, now, due_at, outcome.decision.reason or reply
            )
            relay_alerts.raise_relay_refused(
                session, lane=lane, reply=reply, reason=outcome.classification.reason, now=now
            )
            session.commit()
        return released


def _recordable(outcomes: list[FinishedAttempt]) -> list[dict]:
    """The record values of the outcomes a record statement carries (a refused session is
    held instead, ``write``)."""
    return [_values(o) for o in outcomes if not o.classification.blames_session]


def _values(outcome: FinishedAttempt) -> dict:
    o = outcome
    return records.record_values(o.claim, o.result, o.classification, o.decision, o.now)


class _SessionOnDemand:
    """A Session on `connection`, made only when first used; committing an unused one is free.

    Most outcomes feed the breaker's window in memory and write nothing, so this saves
    building and closing a Session for each of them.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._session: Session | None = None

    def __getattr__(self, name: str):
        if self._session is None:
            self._session = Session(bind=self._connection)
        return getattr(self._session, name)

    def commit(self) -> None:
        if self._session is not None:
            self._session.commit()

    def __enter__(self) -> _SessionOnDemand:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._session is not None:
            self._session.close()
