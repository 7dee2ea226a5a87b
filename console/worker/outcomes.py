"""T2 and what follows it: what a finished attempt's outcome calls for.

For each finished attempt: record the outcome on the engine (compare-and-set on the
lease), put a mailbox the relay called unknown on the suppression list, feed the
breaker and the per-domain back-off, halve the shared send rate after a throttling
reply, and raise the alerts that name the relay's reply. A refusal of the session
(``Classification.blames_session``) is not recorded as an attempt: the lane's breaker
opens at once, the intent waits uncharged, an operator is told.

The breaker's window is fed in memory at once; what the outcome calls for writing (the
breaker's state, the shared rate, a suppression, an alert) runs in one transaction of
the engine (``Engine.in_transaction``), awaited like the record, so on PostgreSQL the
other sends go on while it waits for the database. Most outcomes call for no write, and
then no transaction is opened.

The alerts the worker raises itself: ``relay_refused:<lane>`` (the relay refused our
session, sender or credentials: the lane's breaker is open and its intents wait; it
holds while that breaker holds sends back) and ``smtputf8_missing:<relay>`` (a
non-ASCII address met a relay without SMTPUTF8; one alert per relay, held for
``CONSOLE_ALERT_DEAD_WINDOW_SECONDS``). The worker marks the condition firing
(compare-and-set, in its own short transaction); the alert cycle (``console.ops.alerts``,
by ``ops.alerts.relay``) keeps it, clears it, and posts the webhook.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy.orm import Session

from console.core.blame import THROTTLING
from console.core.classify import SMTPUTF8_NOT_OFFERED
from console.core.rejections import refuses_the_mailbox
from console.engine import Engine, SqlKit
from console.store import alerts, records, suppressions
from console.vocabulary import CLAIMED
from console.words import worker_alerts
from console.worker.claim import SendBudget
from console.worker.decisions import WorkerSettings
from console.worker.guard import SendGuard, Write
from console.worker.reporting import FinishedAttempt

log = logging.getLogger("console.worker.loop")


RELAY_REFUSED = "relay_refused"
SMTPUTF8_MISSING = "smtputf8_missing"
_REPLY_CHARS = 300


def raise_relay_refused(
    session: Session, *, lane: str, reply: str, reason: str, now: dt.datetime
) -> bool:
    """Fire ``relay_refused:<lane>`` naming `reply`; return whether this call fired it."""
    summary = worker_alerts.relay_refused(lane, reply[:_REPLY_CHARS])
    details = {"lane": lane, "reply": reply[:_REPLY_CHARS], "reason": reason[:_REPLY_CHARS]}
    return _fire(session, f"{RELAY_REFUSED}:{lane}", summary, details, now)


def raise_smtputf8_missing(session: Session, *, relay: str, now: dt.datetime) -> bool:
    """Fire ``smtputf8_missing:<relay>``; return whether this call fired it."""
    summary = worker_alerts.smtputf8_missing(relay)
    return _fire(session, f"{SMTPUTF8_MISSING}:{relay}", summary, {"relay": relay}, now)


def _fire(session: Session, key: str, summary: str, details: dict[str, Any], now) -> bool:
    fired = alerts.mark_alert_firing(session, key, summary, details, now)
    if fired:
        log.error(summary, extra={"condition": key, "stage": "alert"})
    return fired


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

    async def write(self, store: Engine, outcome: FinishedAttempt) -> bool:
        """Record `outcome` on `store`, then what it calls for; False when this worker's
        lease was lost (a stale write). A refused session is held instead."""
        if outcome.classification.blames_session:
            released: set[int] = set()
            hold = self._hold_after_session_refusal(outcome, released)
            await store.in_transaction(hold)
            return outcome.claim.attempt_id in released
        if not await store.record(_values(outcome)):
            return False
        writes = self._writes_after(outcome, store.sql)
        if writes:  # most outcomes call for none: no transaction then
            await store.in_transaction(lambda session: _write_each(writes, session))
        return True

    def _writes_after(self, outcome: FinishedAttempt, sql: SqlKit) -> list[Write]:
        """What a recorded outcome calls for beyond its record: the breaker fed now, in
        memory; the writes returned, each committing (`sql`: the engine's)."""
        claim, result, classification = outcome.claim, outcome.result, outcome.classification
        throttled = classification.blamed == THROTTLING
        writes: list[Write] = []
        if throttled and self.budget and self.budget.rate is not None:
            # every worker slows down: the shared rate halves
            writes.append(lambda session: self.budget.throttled(session, sql, outcome.now))
        if self.settings.suppress_refused_mailboxes and refuses_the_mailbox(result, classification):
            writes.append(lambda session: _suppress_refused_mailbox(session, outcome))
        if result.error_type == SMTPUTF8_NOT_OFFERED:
            writes.append(lambda session: self._raise_smtputf8_missing(session, outcome.now))
        if self.guard:
            writes += self.guard.writes_after(
                lane=claim.intent.lane,
                outcome=classification.outcome,
                code=result.code,
                reached_transport=result.stage != CLAIMED,
                now=outcome.now,
                deferral=outcome.deferral,
                message_level=classification.blamed == "message",
                throttled=throttled,
            )
        return writes

    def _raise_smtputf8_missing(self, session: Session, now) -> None:
        raise_smtputf8_missing(session, relay=self.relay, now=now)
        session.commit()

    def _hold_after_session_refusal(self, outcome: FinishedAttempt, released: set[int]) -> Write:
        """Open the lane's breaker, give the intent back uncharged (its attempt id then
        into `released`), raise the alert."""

        def hold(session: Session) -> None:
            claim, result, now = outcome.claim, outcome.result, outcome.now
            lane = claim.intent.lane
            reply = f"{result.code} {result.reply_text or ''}".strip()
            due_at = outcome.decision.next_attempt_at or now
            if self.guard:
                due_at = max(due_at, self.guard.trip(session, lane, now, result.code))
            reason = outcome.decision.reason or reply
            if records.release_refused(session.connection(), claim, now, due_at, reason):
                released.add(claim.attempt_id)
            raise_relay_refused(
                session, lane=lane, reply=reply, reason=outcome.classification.reason, now=now
            )
            session.commit()

        return hold


def _write_each(writes: list[Write], session: Session) -> None:
    for write in writes:
        write(session)


def _suppress_refused_mailbox(session: Session, outcome: FinishedAttempt) -> None:
    claim, result = outcome.claim, outcome.result
    suppressions.suppress_refused_mailbox(
        session.connection(),
        recipient=claim.intent.recipient,
        reply=f"{result.code} {result.reply_text or ''}".strip(),
        attempt_id=claim.attempt_id,
        now=outcome.now,
    )
    session.commit()


def _values(outcome: FinishedAttempt) -> dict:
    o = outcome
    return records.record_values(o.claim, o.result, o.classification, o.decision, o.now)
