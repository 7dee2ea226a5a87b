"""The send loop: claim (T1), send outside any transaction, record (T2). No Flask here.

A ``Worker`` takes a session factory, a transport, a clock and its settings; its
database work goes to the engine of that database (``console.engine``). ``run_once(now)``
runs one tick: heartbeat and lease-expiry sweep, then one
bounded batch claimed and sent over up to ``concurrency`` transport connections, each
sender recording its outcomes while it sends on. ``console worker`` and the scheduler of
``console serve`` call it in a loop (``worker.running``); tests call it tick by tick.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import random as _random
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from console.config import Settings
from console.core.classify import classify
from console.core.lifecycle import Decision
from console.core.send_result import SendResult
from console.engine import engine_for
from console.mail.catalog import TemplateCatalog, catalog_for, default_catalog
from console.models import utcnow
from console.store import claims
from console.store.database import make_engine, make_session_factory
from console.transports.base import OutgoingEmail, Transport
from console.transports.factory import make_transport
from console.transports.smtp import envelope_address
from console.vocabulary import CLAIMED, PENDING
from console.worker import reporting
from console.worker.claim import (
    BatchClaimer,
    CriticalCheck,
    SendBudget,
    housekeeping,
    new_worker_id,
)
from console.worker.decisions import EligibilityPolicy, SendDecisions, WorkerSettings
from console.worker.guard import GuardPolicy, SendGuard
from console.worker.outcomes import OutcomeWriter
from console.worker.reporting import (
    FinishedAttempt,
    TickReport,
    log_batch,
    log_expired_lease,
    report_not_sent,
    report_record,
)
from console.worker.sending import (
    SUPPRESSED_BEFORE_BODY,
    CrashPoint,
    StageMarks,
    SuppressedBeforeBody,
    compose,
)

log = logging.getLogger(__name__)
# A sender's records still being written while it sends on: on PostgreSQL they go in
# batches (``store.record_batches``), up to this many a sender in each.
RECORDS_A_SENDER = 2


class Worker:
    """Claims, sends and records; one tick at a time."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        transport: Transport,
        settings: WorkerSettings,
        *,
        clock: Callable[[], dt.datetime] = utcnow,
        catalog: TemplateCatalog | None = None,
        eligibility: EligibilityPolicy | None = None,
        random: Callable[[], float] = _random.random,
        worker_id: str | None = None,
        crash_at: str | None = None,
        guard_policy: GuardPolicy | None = None,
        budget: SendBudget | None = None,
    ) -> None:
        self.session_factory = session_factory
        database = session_factory.kw["bind"]
        # each sender's mark, and its last record written while its next email goes
        self._engine = engine_for(database, connections=2 * settings.concurrency)
        self._record_errors: list[Exception] = []  # records that failed in this batch
        self.transport = transport
        self.settings = settings
        self._envelope_from = envelope_address(settings.mail_from)
        self.clock = clock
        self.catalog = catalog or default_catalog()
        self.eligibility = eligibility or EligibilityPolicy()
        self.decisions = SendDecisions(self.catalog, settings.retry, self.eligibility, random)
        self.worker_id = worker_id or new_worker_id()
        self.guard = SendGuard(guard_policy, self.worker_id) if guard_policy else None
        self.budget = budget  # the provider's rate and quota; None: unlimited, no statement
        self._crash_if = CrashPoint(crash_at)
        claimer_parts = (self.decisions, lambda: self.clock(), self.worker_id, self.guard)
        self._claimer = BatchClaimer(self._engine, settings, *claimer_parts, budget)
        self._critical = CriticalCheck(self._claimer, enabled=budget is None)  # mid-batch
        relay = getattr(transport, "relay", "relay")
        self._outcomes = OutcomeWriter(settings, self.guard, relay, budget)
        self._refused_lanes: dict[str, dt.datetime] = {}  # lane -> when its intents may go
        self._reconnects_counted = 0
        self.started_at = clock()
        self._waiting_for_tokens = False  # the last claim found the send rate's bucket empty
        self._stages = StageMarks(self._engine, self._crash_if)
        self._stopping = threading.Event()
        self._runner = asyncio.Runner()
        self._owned_engine: Engine | None = None
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings, **options) -> Worker:
        """A worker on the configured database and transport, with its own engine."""
        engine = make_engine(settings.database_url)
        options.setdefault("guard_policy", GuardPolicy.from_settings(settings))
        options.setdefault("catalog", catalog_for(settings))
        options.setdefault("budget", SendBudget.from_settings(settings))
        worker = cls(
            make_session_factory(engine),
            make_transport(settings),
            WorkerSettings.from_settings(settings),
            eligibility=EligibilityPolicy.from_module(settings.eligibility_module),
            **options,
        )
        worker._owned_engine = engine
        return worker

    def run_once(self, now: dt.datetime | None = None) -> TickReport:
        """Run one tick at `now` (default: the clock) and return what it did."""
        try:
            return self._runner.run(self.tick(now or self.clock()))
        except Exception:  # the database gone, say: no mark on a connection it dropped
            self._runner.run(self._engine.forget_connections())
            raise

    def request_stop(self) -> None:
        """Finish the sends in flight, give back the rest of the batch, claim no more."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def close(self) -> None:
        """Close the transport's connections, the event loop and an engine of its own."""
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self.transport.close())
            self._runner.run(self._engine.close())
        finally:
            self._runner.close()
        if self._owned_engine is not None:
            self._owned_engine.dispose()

    async def tick(self, now: dt.datetime) -> TickReport:
        """Heartbeat and sweep, then claim one batch, send it and record each outcome."""
        report = TickReport()
        reporting.record_tick()
        await self._housekeeping(now, report)
        if self.stopping:
            return report
        leased = await self._claim(now, report)
        report.claimed = len(leased)
        if not leased:
            if not self._waiting_for_tokens:  # idle: no connections for the relay to drop
                await self.transport.close()  # (waiting for the send rate, keep them warm)
            return report
        self._crash_if("claimed")
        started = time.perf_counter()
        await self._send_batch(leased, report)
        log_batch(self.worker_id, report.claimed, report.statuses, time.perf_counter() - started)
        return report

    async def _claim(self, now: dt.datetime, report: TickReport) -> list[claims.Claim]:
        """T1 (``BatchClaimer``): the batch leased; what it closed unsent counted."""
        batch = await self._claimer.claim(now)
        self._waiting_for_tokens = batch.waiting_for_tokens
        report_not_sent(batch.not_sent, report)
        return batch.leased

    async def _housekeeping(self, now: dt.datetime, report: TickReport) -> None:
        """Heartbeat, take back silent workers' leases, match early provider events; commit."""
        swept = await housekeeping(
            self._engine, self.worker_id, self.started_at, self.decisions, now
        )
        report.swept += len(swept)
        for lease, decision in swept:
            log_expired_lease(lease, decision)

    async def _send_batch(self, leased: list[claims.Claim], report: TickReport) -> None:
        waiting = collections.deque(leased)
        held_back: list[tuple[claims.Claim, dt.datetime]] = []  # their domain deferred
        self._refused_lanes = {}

        async def one_connection() -> None:
            recording: collections.deque = collections.deque()  # its records in flight
            try:
                while waiting and not self.stopping:
                    claim = waiting.popleft()
                    if critical := await self._critical.after_take(waiting, self.clock):
                        report.claimed += len(critical.leased)  # due since the claim: next
                        report_not_sent(critical.not_sent, report)
                    until = self._refused_lanes.get(claim.intent.lane)
                    if until is None and self._deferral_of(claim.intent.recipient) is not None:
                        # the claim skips a deferred domain: back with its place in the queue
                        until = claim.intent.next_attempt_at
                    if until is not None:
                        held_back.append((claim, until))
                        continue
                    outcome = await self._process(claim)
                    if len(recording) == RECORDS_A_SENDER:
                        await recording.popleft()
                    recording.append(asyncio.ensure_future(self._record(outcome, report)))
            finally:
                for record in recording:
                    await record

        lanes = min(self.settings.concurrency, len(leased))
        self._critical.start()
        try:
            await asyncio.gather(*(one_connection() for _ in range(lanes)))
        finally:
            await self._engine.release()
            self._count_reconnects()
        await self._raise_record_error()
        report.released += await self._claimer.give_back(list(waiting), held_back, self.clock())

    def _count_reconnects(self) -> None:
        """Add the connections the transport replaced since the last batch to /metrics."""
        reconnects = getattr(self.transport, "reconnects", 0)
        if reconnects > self._reconnects_counted:
            reporting.SMTP_RECONNECTS.inc(reconnects - self._reconnects_counted)
        self._reconnects_counted = reconnects

    def _deferral_of(self, recipient: str) -> dt.datetime | None:
        """When the recipient's domain deferred during this batch: the deferral's end."""
        return self.guard.deferral_of(recipient, self.clock()) if self.guard else None

    async def _process(self, claim: claims.Claim) -> FinishedAttempt:
        """Send one claimed intent; what its T2 is to record."""
        result = await self._send(claim)
        if result.error_type == SuppressedBeforeBody.__name__:  # refused by the mark itself
            now = self.clock()
            # the envelope was reset, no byte of the body left: the message was never sent
            result = SendResult(stage=CLAIMED, error=SUPPRESSED_BEFORE_BODY, duration_ms=0)
            classification, decision = self.decisions.suppressed_at_send(claim.intent, now)
        else:
            classification = classify(result, self.settings.overrides)
            duration_seconds = (result.duration_ms or 0) / 1000
            reporting.record_attempt(classification.outcome, claim.intent.lane, duration_seconds)
            now = self.clock()
            if classification.blames_session:
                decision = self._wait_uncharged(claim, classification.reason, now)
            else:
                decision = self.decisions.after_attempt(
                    claim.intent, claim.attempt_number, classification, now
                )
        deferral = None
        # a refused session says nothing about the domain; the guard reads the reply itself
        if self.guard and result.stage != CLAIMED and not classification.blames_session:
            recipient, outcome_name = claim.intent.recipient, classification.outcome
            deferral = self.guard.note_domain_outcome(recipient, outcome_name, result, now)
        self._crash_if("before_record")
        return FinishedAttempt(claim, result, classification, decision, now, deferral)

    def _wait_uncharged(self, claim: claims.Claim, reason: str, now: dt.datetime) -> Decision:
        """The relay refused the session: the intent waits, the rest of its lane too."""
        delay = self.decisions.retry.backoff.delay_seconds(
            claim.attempt_number, self.decisions.random
        )
        due_at = now + dt.timedelta(seconds=delay)
        self._refused_lanes[claim.intent.lane] = due_at
        return Decision(PENDING, f"waiting, not charged as an attempt: {reason}", due_at, True)

    async def _send(self, claim: claims.Claim) -> SendResult:
        """Hand the claim's email to the transport; a compose failure is its result."""
        email = self._compose(claim)
        if isinstance(email, SendResult):
            return email
        return await self.transport.send(email, self._stages.on_stage)

    def _compose(self, claim: claims.Claim) -> OutgoingEmail | SendResult:
        return compose(
            claim,
            self.catalog,
            mail_from=self.settings.mail_from,
            envelope_from=self._envelope_from,
            date=self.clock(),
            provider=self.settings.provider,
        )

    async def _record(self, outcome: FinishedAttempt, report: TickReport) -> None:
        """T2 of one attempt on the engine, then its log line; a failure is kept for the
        batch's end (``_raise_record_error``) and the other senders go on."""
        try:
            recorded = await self._outcomes.write(self._engine, outcome)
        except Exception as error:  # noqa: BLE001 - raised once the batch has ended
            self._record_errors.append(error)
            return
        report_record(outcome, report, recorded)

    async def _raise_record_error(self) -> None:
        """Fail the tick with the batch's first failed record; the store then starts again
        on fresh connections."""
        if not self._record_errors:
            return
        first, self._record_errors = self._record_errors[0], []
        await self._engine.forget_connections()
        raise first
