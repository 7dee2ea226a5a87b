"""T2 and what follows it: what a finished attempt's outcome calls for.

For each finished attempt: record the outcome on the engine (compare-and-set on the
lease), put a mailbox the relay called unknown on the suppression list, feed the
breaker and the per-domain back-off, halve the shared send rate after a throttling
reply, and raise the alerts that name the relay's reply. A refusal of the session
(``Classification.blames_session``) is not recorded as an attempt: the lane's breaker
opens at once, the intent waits uncharged, an operator is told.

The breaker's window is fed in memory at once; what the outcome calls for writing (the
breaker's state, a domain's deferral, the shared rate, a suppression, an alert) is one
engine operation each, committed, awaited like the record, so on PostgreSQL the other
sends go on while it waits for the database. Most outcomes call for no write.

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

from console.core.blame import THROTTLING
from console.core.classify import SMTPUTF8_NOT_OFFERED
from console.core.rejections import refuses_the_mailbox
from console.engine import Engine
from console.store import records
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


async def raise_relay_refused(
    engine: Engine, *, lane: str, reply: str, reason: str, now: dt.datetime
) -> bool:
    """Fire ``relay_refused:<lane>`` naming `reply`; return whether this call fired it."""
    summary = worker_alerts.relay_refused(lane, reply[:_REPLY_CHARS])
    details = {"lane": lane, "reply": reply[:_REPLY_CHARS], "reason": reason[:_REPLY_CHARS]}
    return await _fire(engine, f"{RELAY_REFUSED}:{lane}", summary, details, now)


async def raise_smtputf8_missing(engine: Engine, *, relay: str, now: dt.datetime) -> bool:
    """Fire ``smtputf8_missing:<relay>``; return whether this call fired it."""
    summary = worker_alerts.smtputf8_missing(relay)
    return await _fire(engine, f"{SMTPUTF8_MISSING}:{relay}", summary, {"relay": relay}, now)


async def _fire(engine: Engine, key: str, summary: str, details: dict[str, Any], now) -> bool:
    fired = await engine.fire_alert(key, summary, details, now)
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

    async def write(self, engine: Engine, outcome: FinishedAttempt) -> bool:
        """Record `outcome` on `engine`, then what it calls for, each write committed;
        False when this worker's lease was lost (a stale write). A refused session is
        held instead."""
        if outcome.classification.blames_session:
            return await self._hold_after_session_refusal(engine, outcome)
        if not await engine.record(_values(outcome)):
            return False
        for write in self._writes_after(outcome):  # most outcomes call for none
            await write(engine)
        return True

    def _writes_after(self, outcome: FinishedAttempt) -> list[Write]:
        """What a recorded outcome calls for beyond its record: the breaker fed now, in
        memory; the writes returned, each committing."""
        claim, result, classification = outcome.claim, outcome.result, outcome.classification
        throttled = classification.blamed == THROTTLING
        writes: list[Write] = []
        if throttled and self.budget and self.budget.rate is not None:
            # every worker slows down: the shared rate halves
            writes.append(lambda engine: self.budget.throttled(engine, outcome.now))
        if self.settings.suppress_refused_mailboxes and refuses_the_mailbox(result, classification):
            writes.append(lambda engine: _suppress_refused_mailbox(engine, outcome))
        if result.error_type == SMTPUTF8_NOT_OFFERED:
            writes.append(
                lambda engine: raise_smtputf8_missing(engine, relay=self.relay, now=outcome.now)
            )
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

    async def _hold_after_session_refusal(self, engine: Engine, outcome: FinishedAttempt) -> bool:
        """Open the lane's breaker, give the intent back uncharged, raise the alert; whether
        the intent went back (False: this worker's lease was lost)."""
        claim, result, now = outcome.claim, outcome.result, outcome.now
        lane = claim.intent.lane
        reply = f"{result.code} {result.reply_text or ''}".strip()
        due_at = outcome.decision.next_attempt_at or now
        if self.guard:
            due_at = max(due_at, await self.guard.trip(engine, lane, now, result.code))
        held = await engine.hold_refused(claim, due_at, outcome.decision.reason or reply, now)
        await raise_relay_refused(
            engine, lane=lane, reply=reply, reason=outcome.classification.reason, now=now
        )
        return held


async def _suppress_refused_mailbox(engine: Engine, outcome: FinishedAttempt) -> None:
    claim, result = outcome.claim, outcome.result
    await engine.suppress_refused_mailbox(
        claim.intent.recipient,
        f"{result.code} {result.reply_text or ''}".strip(),
        claim.attempt_id,
        outcome.now,
    )


def _values(outcome: FinishedAttempt) -> dict:
    o = outcome
    return records.record_values(o.claim, o.result, o.classification, o.decision, o.now)
