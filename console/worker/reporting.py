"""What the worker tells: what a tick did, its log lines and its Prometheus counters.

``TickReport`` is what one tick did; ``FinishedAttempt`` one attempt on its way to T2.
One log line per decision of the send loop: ids, stage, outcome, retry; no params or
bodies. The counters (attempts by outcome, send latency by lane, loop iterations,
domain deferrals, SMTP reconnects) live in ``PROCESS_REGISTRY``; Prometheus sums them
over the scraped processes (``console.ops.metrics.prometheus`` serves them with the
queue's state). No database queries, no web server here.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import functools
import logging

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.process_collector import ProcessCollector

from console.core.domain_backoff import Deferral
from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.readable import format_age
from console.core.send_result import SendResult
from console.store.claims import Claim
from console.vocabulary import ACCEPTED

log = logging.getLogger("console.worker.loop")


@dataclasses.dataclass
class TickReport:
    """What one tick did, for loops (was the batch full?) and tests."""

    claimed: int = 0
    swept: int = 0
    stale: int = 0
    released: int = 0
    statuses: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def add_status(self, status: str) -> None:
        """Count one intent that moved to `status`."""
        self.statuses[status] += 1

    def add_stale(self) -> None:
        """Count one record that found its lease taken (nothing written)."""
        self.stale += 1


@dataclasses.dataclass(frozen=True)
class FinishedAttempt:
    """One finished attempt on its way to T2."""

    claim: Claim
    result: SendResult
    classification: Classification
    decision: Decision
    now: dt.datetime
    deferral: Deferral | None = None  # the run of 4yz this outcome completed


LATENCY_BUCKETS_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

PROCESS_REGISTRY = CollectorRegistry()
ProcessCollector(registry=PROCESS_REGISTRY)
ATTEMPTS = Counter(
    "console_attempts",
    "Attempts finished by workers of this process, by classified outcome.",
    ["outcome"],
    registry=PROCESS_REGISTRY,
)
SEND_LATENCY = Histogram(
    "console_send_latency_seconds",
    "Time from the start of an attempt to the transport's answer, in this process.",
    ["lane"],
    buckets=LATENCY_BUCKETS_SECONDS,
    registry=PROCESS_REGISTRY,
)
TICKS = Counter(
    "console_worker_ticks",
    "Worker loop iterations (claim, send, record) in this process.",
    registry=PROCESS_REGISTRY,
)
DOMAIN_DEFERRALS = Counter(
    "console_domain_deferrals",
    "Times a run of 4yz replies deferred every due intent of a recipient domain.",
    registry=PROCESS_REGISTRY,
)
SMTP_RECONNECTS = Counter(
    "console_smtp_reconnects",
    "SMTP connections opened to replace one that broke (hang-up, timeout, 421).",
    registry=PROCESS_REGISTRY,
)


def record_attempt(outcome: str, lane: str, duration_seconds: float) -> None:
    """Count one finished attempt and its send latency."""
    _attempts_with(outcome).inc()
    _latency_in(lane).observe(max(duration_seconds, 0.0))


def record_tick() -> None:
    """Count one iteration of a worker loop."""
    TICKS.inc()


# Each label's child, looked up once: ``labels()`` checks and converts its values and
# takes the metric's lock on every call, twice a message on the send path (the
# children live as long as their metric; none is ever removed).
@functools.cache
def _attempts_with(outcome: str) -> Counter:
    return ATTEMPTS.labels(outcome=outcome)


@functools.cache
def _latency_in(lane: str) -> Histogram:
    return SEND_LATENCY.labels(lane=lane)


def log_decision(
    decision: Decision,
    intent_id: int,
    attempt_id: int | None,
    stage: str | None,
    outcome: str | None = None,
    code: int | None = None,
    now: dt.datetime | None = None,
    attempt_number: int | None = None,
) -> None:
    """One line per decision: ids, stage, outcome and retry decision; never params or bodies.

    The line names the attempt by its number (1 for an intent's first), as the pages do.

    Plain acceptances are DEBUG; every failure, retry, hold or dead letter is INFO or ERROR.
    """
    level = logging.ERROR if decision.alert else logging.INFO
    if outcome == ACCEPTED and not decision.alert:
        level = logging.DEBUG
    if not log.isEnabledFor(level):  # an acceptance at INFO: nothing is built
        return
    retry_in_seconds = None
    if decision.next_attempt_at is not None and now is not None:
        retry_in_seconds = round((decision.next_attempt_at - now).total_seconds(), 3)
    message = "intent=%s attempt=%s stage=%s outcome=%s code=%s -> %s"
    shown = [intent_id, attempt_number, stage, outcome, code, decision.status]
    if retry_in_seconds is not None:
        message += ", retry in %s"
        shown.append(format_age(retry_in_seconds))
    log.log(
        level,
        message,
        *shown,
        extra=dict(
            intent_id=intent_id,
            attempt_id=attempt_id,
            attempt_number=attempt_number,
            stage=stage,
            outcome=outcome,
            code=code,
            decision=decision.status,
            retry_in_seconds=retry_in_seconds,
        ),
    )


def log_record(outcome: FinishedAttempt, recorded: bool) -> None:
    """The line of one attempt's T2: its decision, or that its lease was taken meanwhile."""
    claim, decision = outcome.claim, outcome.decision
    classification, result = outcome.classification, outcome.result
    if not recorded:
        log_stale_attempt(claim.intent.id, claim.attempt_number, classification.outcome)
        return
    stage, code = result.stage, result.code
    log_decision(
        decision,
        claim.intent.id,
        claim.attempt_id,
        stage,
        classification.outcome,
        code,
        outcome.now,
        claim.attempt_number,
    )


def report_record(outcome: FinishedAttempt, report: TickReport, recorded: bool) -> None:
    """A recorded outcome counted in its tick's report (a stale one as such), logged."""
    if recorded:
        report.add_status(outcome.decision.status)
    else:
        report.add_stale()
    log_record(outcome, recorded)


def report_not_sent(not_sent, report) -> None:
    """What a claim closed without an attempt (expired, suppressed...), each (intent,
    decision), counted in its tick's report and logged."""
    for intent, decision in not_sent:
        report.add_status(decision.status)
        log_decision(decision, intent_id=intent.id, attempt_id=None, stage=None)


def log_expired_lease(lease, decision: Decision) -> None:
    """Warn that a silent worker's lease was taken back, and where its intent went."""
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


def log_stale_attempt(intent_id: int, attempt_number: int, outcome: str) -> None:
    """Warn that an outcome was not recorded because the lease was taken back meanwhile."""
    log.warning(
        "stale attempt not recorded: intent=%s attempt=%s outcome=%s; the lease was "
        "taken back meanwhile",
        intent_id,
        attempt_number,
        outcome,
        extra=dict(intent_id=intent_id, attempt_number=attempt_number, outcome=outcome),
    )


def log_batch(worker_id: str, claimed: int, statuses: dict[str, int], seconds: float) -> None:
    """One INFO line per batch sent: how many, where they went, how long it took."""
    log.info(
        "batch sent: claimed=%s %s in %.3f s",
        claimed,
        " ".join(f"{status}={count}" for status, count in sorted(statuses.items())),
        seconds,
        extra=dict(worker_id=worker_id, count=claimed, elapsed_ms=round(seconds * 1000, 1)),
    )
