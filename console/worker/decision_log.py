"""One log line per decision of the send loop: ids, stage, outcome, retry; no params or bodies
(and the tick's report of what was recorded)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

from console.core.lifecycle import Decision
from console.core.readable import format_age
from console.vocabulary import ACCEPTED

if TYPE_CHECKING:
    from console.worker.tick import FinishedAttempt, TickReport

log = logging.getLogger("console.worker.loop")


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
