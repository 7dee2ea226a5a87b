"""The send loop: claim (T1), send outside any transaction, record (T2). No Flask here.

A ``Worker`` takes a session factory, a transport, a clock and its settings.
``run_once(now)`` runs one tick: heartbeat, lease-expiry sweep, then one bounded
batch claimed, sent over up to ``concurrency`` transport connections, and
recorded one by one. ``console worker`` and the scheduler of ``console serve``
call it in a loop; tests call it tick by tick.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import logging
import os
import random as _random
import secrets
import signal
import socket
import threading
from collections.abc import Callable

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from console.config import Settings
from console.core.backoff import Backoff
from console.core.classify import (
    RENDER_ERROR,
    Classification,
    Overrides,
    classify,
    parse_overrides,
)
from console.core.lifecycle import (
    Decision,
    IntentFacts,
    RetryPolicy,
    TemplateRules,
    classify_lease_expiry,
    decide_after_attempt,
    decide_at_claim,
)
from console.core.send_result import SendResult, handed_over
from console.mail.render import TemplateCatalog, TemplateError, default_catalog
from console.mail.serialize import serialize_message
from console.models import utcnow
from console.ops import metrics
from console.store import claims as store
from console.store.database import make_engine, make_session_factory
from console.store.events import match_unmatched_events
from console.store.serial_writes import SerialWrites
from console.transports.base import OutgoingEmail, Transport
from console.transports.factory import make_transport
from console.transports.smtp import envelope_address
from console.vocabulary import CLAIMED, DATA_SENT, ENVELOPE, PENDING
from console.worker.eligibility import EligibilityPolicy
from console.worker.guard import GuardPolicy, SendGuard

log = logging.getLogger(__name__)

# Test-only: CONSOLE_TEST_CRASH_AT=<point> makes the worker SIGKILL itself there.
CRASH_POINTS = ("claimed", "envelope", "data_sent", "before_record")


class LeaseLost(RuntimeError):
    """The lease-expiry sweep took this attempt back before its body was handed over."""


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """The part of the product's settings the send loop needs."""

    mail_from: str
    retry: RetryPolicy
    batch_size: int = 50
    lease_seconds: float = 300.0
    concurrency: int = 1
    overrides: Overrides = Overrides()

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerSettings:
        backoff = Backoff(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_floor_seconds
        )
        return cls(
            mail_from=settings.mail_from,
            retry=RetryPolicy(backoff, settings.max_attempts, settings.max_age_seconds),
            batch_size=settings.batch_size,
            lease_seconds=settings.lease_seconds,
            concurrency=settings.smtp_connections,
            overrides=parse_overrides(settings.classify_overrides),
        )


@dataclasses.dataclass
class TickReport:
    """What one tick did, for loops (was the batch full?) and tests."""

    claimed: int = 0
    swept: int = 0
    stale: int = 0
    released: int = 0
    statuses: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """One finished attempt on its way to T2."""

    claim: store.Claim
    result: SendResult
    classification: Classification
    decision: Decision
    now: dt.datetime


def new_worker_id() -> str:
    """Return ``host:pid:random``, unique among every worker sharing the database."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


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
    ) -> None:
        if crash_at is not None and crash_at not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {crash_at!r}: expected one of {CRASH_POINTS}")
        self.session_factory = session_factory
        self._writes = SerialWrites(session_factory.kw["bind"])
        self._marks: Connection | None = None
        self.transport = transport
        self.settings = settings
        self._envelope_from = envelope_address(settings.mail_from)
        self.clock = clock
        self.catalog = catalog or default_catalog()
        self.eligibility = eligibility or EligibilityPolicy()
        self.random = random
        self.worker_id = worker_id or new_worker_id()
        self.guard = SendGuard(guard_policy, self.worker_id) if guard_policy else None
        self.started_at = clock()
        self._crash_at = crash_at
        self._stopping = threading.Event()
        self._runner = asyncio.Runner()
        self._owned_engine: Engine | None = None
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings, **options) -> Worker:
        """A worker on the configured database and transport, with its own engine."""
        engine = make_engine(settings.database_url)
        options.setdefault("guard_policy", GuardPolicy.from_settings(settings))
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
        return self._runner.run(self.tick(now or self.clock()))

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
        self._runner.run(self.transport.close())
        self._runner.close()
        self._writes.shutdown()
        if self._owned_engine is not None:
            self._owned_engine.dispose()

    async def tick(self, now: dt.datetime) -> TickReport:
        report = TickReport()
        metrics.record_tick()
        self._housekeeping(now, report)
        if self.stopping:
            return report
        with self.session_factory() as session:
            lane_limits = None
            if self.guard:  # lanes paused by their circuit breaker, or probing
                lane_limits = self.guard.lane_limits(session, now, self.settings.batch_size)
            batch = store.claim_due(
                session,
                now=now,
                limit=self.settings.batch_size,
                lease_seconds=self.settings.lease_seconds,
                worker_id=self.worker_id,
                screen=self._screen,
                lane_limits=lane_limits,
            )
            if self.guard:
                self.guard.release_unused_probes(
                    session, {c.intent.lane for c in batch.claims}, now
                )
        for intent, decision in batch.not_sent:
            report.statuses[decision.status] += 1
            _log_decision(decision, intent_id=intent.id, attempt_id=None, stage=None)
        report.claimed = len(batch.claims)
        if not batch.claims:
            await self.transport.close()  # idle: do not keep connections the relay will drop
            return report
        self._crash_if("claimed")
        await self._send_batch(batch.claims, report)
        return report

    def _housekeeping(self, now: dt.datetime, report: TickReport) -> None:
        with self.session_factory() as session:
            store.beat(
                session,
                worker_id=self.worker_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=self.started_at,
                now=now,
            )
            swept = store.sweep_expired_leases(
                session, now=now, judge=lambda lease: self._judge_expired_lease(lease, now)
            )
            match_unmatched_events(session, now=now)  # provider events that came before their id
            session.commit()
        for lease, decision in swept:
            report.swept += 1
            log.warning(
                "lease expired: intent=%s attempt=%s stage=%s -> %s",
                lease.intent.id,
                lease.attempt_id,
                lease.stage,
                decision.status,
                extra=dict(
                    intent_id=lease.intent.id,
                    attempt_id=lease.attempt_id,
                    stage=lease.stage,
                    status=decision.status,
                ),
            )

    def _judge_expired_lease(self, lease: store.ExpiredLease, now: dt.datetime):
        classification = classify_lease_expiry(lease.stage, handed_over(lease.stage))
        facts = self._facts(lease.intent, attempts_made=lease.intent.attempt_count)
        return classification, decide_after_attempt(
            classification, facts, now, self.settings.retry, self.random
        )

    def _screen(self, intent: store.DueIntent, suppressed: bool, session: Session):
        """Recheck at claim: expiry, suppression, then the application's eligibility check."""
        now = self.clock()
        facts = self._facts(intent, attempts_made=intent.attempt_count)
        decision = decide_at_claim(facts, now, suppressed=suppressed, ineligible_reason=None)
        if decision is not None:
            return decision
        try:
            reason = self.eligibility.reason_not_to_send(intent, session)
        except Exception as error:  # noqa: BLE001 - the application's code: defer, do not cancel
            log.error(
                "eligibility check failed: intent=%s error=%s",
                intent.id,
                type(error).__name__,
                extra=dict(intent_id=intent.id, error_type=type(error).__name__),
            )
            delay = dt.timedelta(seconds=self.settings.retry.backoff.delay_seconds(1, self.random))
            return Decision(
                PENDING, f"eligibility check failed ({type(error).__name__})", now + delay
            )
        return decide_at_claim(facts, now, suppressed=False, ineligible_reason=reason)

    def _facts(self, intent: store.DueIntent, attempts_made: int) -> IntentFacts:
        try:
            template = self.catalog.settings(intent.template)
            rules = TemplateRules(template.ambiguity_policy, template.max_age_seconds)
        except TemplateError:
            rules = TemplateRules()
        return IntentFacts(intent.created_at, intent.expires_at, attempts_made, rules)

    async def _send_batch(self, claims: list[store.Claim], report: TickReport) -> None:
        waiting = collections.deque(claims)
        records: list[asyncio.Future] = []

        async def one_connection() -> None:
            while waiting and not self.stopping:
                await self._process(waiting.popleft(), records, report)

        lanes = min(self.settings.concurrency, len(claims))
        try:
            await asyncio.gather(*(one_connection() for _ in range(lanes)))
        finally:
            await asyncio.gather(*records)
            await self._writes.release_connection()
            if self._marks is not None:
                self._marks.close()
                self._marks = None
        if waiting:
            with self.session_factory() as session:
                report.released = store.release(session, list(waiting), self.clock())

    async def _process(
        self, claim: store.Claim, records: list[asyncio.Future], report: TickReport
    ) -> None:
        """Send one claimed intent; its T2 is queued and runs while the next one is sent."""
        email = self._compose(claim)
        if isinstance(email, SendResult):
            result = email
        else:
            result = await self.transport.send(email, self._on_stage)
        classification = classify(result, self.settings.overrides)
        metrics.record_attempt(
            classification.outcome, claim.intent.lane, (result.duration_ms or 0) / 1000
        )
        now = self.clock()
        facts = self._facts(claim.intent, attempts_made=claim.attempt_number)
        decision = decide_after_attempt(
            classification, facts, now, self.settings.retry, self.random
        )
        self._crash_if("before_record")
        outcome = _Outcome(claim, result, classification, decision, now)
        records.append(asyncio.ensure_future(self._record(outcome, report)))

    async def _record(self, outcome: _Outcome, report: TickReport) -> None:
        claim, decision = outcome.claim, outcome.decision
        if not await self._writes.submit(self._record_and_guard, outcome):
            report.stale += 1
            log.warning(
                "stale attempt not recorded: intent=%s attempt=%s outcome=%s; the lease was "
                "taken back meanwhile",
                claim.intent.id,
                claim.attempt_id,
                outcome.classification.outcome,
                extra=dict(
                    intent_id=claim.intent.id,
                    attempt_id=claim.attempt_id,
                    outcome=outcome.classification.outcome,
                ),
            )
            return
        report.statuses[decision.status] += 1
        _log_decision(
            decision,
            claim.intent.id,
            claim.attempt_id,
            outcome.result.stage,
            outcome.classification.outcome,
            outcome.result.code,
            outcome.now,
        )

    def _record_and_guard(self, connection: Connection, outcome: _Outcome) -> bool:
        """T2, then feed the outcome to the breaker and per-domain back-off (writes thread)."""
        claim, result = outcome.claim, outcome.result
        recorded = store.record_outcome(
            connection, claim, result, outcome.classification, outcome.decision, outcome.now
        )
        if recorded and self.guard:
            with Session(bind=connection) as session:
                self.guard.after_outcome(
                    session,
                    lane=claim.intent.lane,
                    recipient=claim.intent.recipient,
                    outcome=outcome.classification.outcome,
                    code=result.code,
                    reached_transport=result.stage != CLAIMED,
                    now=outcome.now,
                )
        return recorded

    def _compose(self, claim: store.Claim) -> OutgoingEmail | SendResult:
        """Render the stored template and params; a failure is a result, not an exception."""
        intent = claim.intent
        try:
            parts = self.catalog.render(
                intent.template, intent.template_version, intent.params or {}
            )
        except (TemplateError, OSError) as error:
            return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=RENDER_ERROR)
        mail_from = self.settings.mail_from
        date = self.clock()

        def as_bytes() -> bytes:
            return serialize_message(
                mail_from=mail_from,
                recipient=intent.recipient,
                message_id=intent.message_id,
                parts=parts,
                date=date,
            )

        return OutgoingEmail(
            intent_id=intent.id,
            attempt_id=claim.attempt_id,
            message_id=intent.message_id,
            idempotency_key=intent.idempotency_key,
            mail_from=mail_from,
            envelope_from=self._envelope_from,
            recipient=intent.recipient,
            subject=parts.subject,
            text=parts.text,
            html=parts.html,
            created_at_epoch=intent.created_at.timestamp(),
            as_bytes=as_bytes,
        )

    async def _on_stage(self, email: OutgoingEmail, stage: str) -> None:
        if stage == ENVELOPE:
            self._crash_if("envelope")
        if stage != DATA_SENT:
            return
        if not store.mark_data_sent(self._mark_connection(), email.attempt_id):
            raise LeaseLost(f"attempt {email.attempt_id} was swept before its body was sent")
        self._crash_if("data_sent")

    def _mark_connection(self) -> Connection:
        """The connection of this batch's DATA_SENT marks, in the event loop's thread."""
        if self._marks is None:
            self._marks = store.writer(self.session_factory.kw["bind"])
        return self._marks

    def _crash_if(self, point: str) -> None:
        if self._crash_at == point:
            log.warning("CONSOLE_TEST_CRASH_AT=%s: killing this worker now", point)
            os.kill(os.getpid(), signal.SIGKILL)


def _log_decision(
    decision: Decision,
    intent_id: int,
    attempt_id: int | None,
    stage: str | None,
    outcome: str | None = None,
    code: int | None = None,
    now: dt.datetime | None = None,
) -> None:
    """One line per decision: ids, stage, outcome and retry decision; never params or bodies.

    Plain acceptances are DEBUG; every failure, retry, hold or dead letter is INFO or ERROR.
    """
    level = logging.ERROR if decision.alert else logging.INFO
    if outcome == "accepted" and not decision.alert:
        level = logging.DEBUG
    retry_in_seconds = None
    if decision.next_attempt_at is not None and now is not None:
        retry_in_seconds = round((decision.next_attempt_at - now).total_seconds(), 3)
    log.log(
        level,
        "intent=%s attempt=%s stage=%s outcome=%s code=%s -> %s retry_in=%s",
        intent_id,
        attempt_id,
        stage,
        outcome,
        code,
        decision.status,
        retry_in_seconds,
        extra=dict(
            intent_id=intent_id,
            attempt_id=attempt_id,
            stage=stage,
            outcome=outcome,
            code=code,
            decision=decision.status,
            retry_in_seconds=retry_in_seconds,
        ),
    )


def run_loop(worker: Worker, *, poll_seconds: float, wake: threading.Event) -> None:
    """Tick until ``worker.request_stop()``: again at once while batches come back full,
    else after `poll_seconds` or as soon as `wake` is set (an enqueue, a stop request).
    """
    while not worker.stopping:
        wake.clear()
        try:
            report = worker.run_once()
        except Exception:  # noqa: BLE001 - e.g. the database restarting: try again next poll
            log.exception("worker tick failed", extra=dict(worker_id=worker.worker_id))
            report = TickReport()
        if report.claimed >= worker.settings.batch_size:
            continue
        wake.wait(poll_seconds)
