"""The drills of transactions and crashes: a rollback, a process dead after its commit,
a worker killed after the claim and after the body, an answer lost after acceptance."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from sqlalchemy import func, select

from console import outbox
from console.drill.child import PROGRAM as CHILD_PROGRAM
from console.drill.context import DrillContext, wait_for
from console.drill.reconcile import DRILL_ACTOR, exercise_rule, reconciliation_rule
from console.drill.report import Result, not_applicable
from console.models import Intent
from console.store.suppressions import add_suppression
from console.vocabulary import (
    AMBIGUOUS,
    DATA_SENT,
    HOLD,
    RESEND,
    SENDING,
    SUBMITTED,
    SUPPRESSED,
)

SETTLE_SECONDS = 15.0  # a condition not met by then fails the drill
# A worker whose recipient the relay holds at RCPT TO waits for it past the relay's bound,
# however long the drill takes to do what it holds it for on a busy machine.
HELD_TIMINGS = {"CONSOLE_SMTP_TIMEOUT_SECONDS": "90"}


def _outcomes(ctx: DrillContext, intent_id: int) -> str:
    outcomes = [a.outcome or "none" for a in ctx.attempts(intent_id)]
    return ", ".join(outcomes) or "none"


def rollback(ctx: DrillContext) -> Iterator[Result]:
    """enqueue() inside a business transaction that rolls back leaves no intent."""
    started = time.monotonic()
    template = ctx.plain_template()
    key = ctx.key("rollback")
    count = select(func.count()).select_from(Intent).where(Intent.idempotency_key == key)
    with ctx.sessions() as session:
        outbox.enqueue(session, key=key, to=ctx.address("rollback"), template=template,
                       params=ctx.example_params(template))  # fmt: skip
        session.flush()
        inside = session.scalar(count)
        session.rollback()
    with ctx.sessions() as session:
        after = session.scalar(count)
    yield Result(
        "rollback", template, "no intent after the rollback",
        f"{inside} intent inside the transaction, {after} after the rollback",
        inside == 1 and after == 0, time.monotonic() - started,
    )  # fmt: skip


def commit_then_die(ctx: DrillContext) -> Iterator[Result]:
    """A process that commits its enqueue and dies before any wake-up: the poller sends it."""
    started = time.monotonic()
    template = ctx.plain_template()
    key, to = ctx.key("commit-then-die"), ctx.address("commit-then-die")
    worker = ctx.start_worker()
    try:
        ticking = wait_for(lambda: ctx.ticked(worker.pid), SETTLE_SECONDS)
        child = subprocess.run(
            [sys.executable, "-c", CHILD_PROGRAM, key, to, template],
            env=ctx.worker_environment(), capture_output=True, timeout=60,
        )  # fmt: skip
        committed = time.monotonic()
        intent_id = _id_of(ctx, key)
        sent = intent_id is not None and wait_for(
            lambda: ctx.intent(intent_id).status == SUBMITTED, SETTLE_SECONDS
        )
        waited = time.monotonic() - committed
    finally:
        ctx.stop(worker)
    bodies = ctx.received(ctx.intent(intent_id).message_id) if intent_id else 0
    died = child.returncode == -signal.SIGKILL
    if not died:
        observed = f"the enqueueing process ended with {child.returncode}: {child.stderr[-200:]!r}"
    elif intent_id is None:
        observed = "no intent after the commit"
    else:
        observed = (
            f"{ctx.intent(intent_id).status} {waited:.1f} s after the commit "
            f"({'worker polling' if ticking else 'worker not seen ticking'}), {bodies} body"
        )
    yield Result(
        "commit-then-die", template, "the running worker's poll finds it and sends it once",
        observed, died and sent and bodies == 1, time.monotonic() - started,
    )  # fmt: skip


def _id_of(ctx: DrillContext, key: str) -> int | None:
    with ctx.sessions() as session:
        return session.scalar(select(Intent.id).where(Intent.idempotency_key == key))


def killed_after_claim(ctx: DrillContext) -> Iterator[Result]:
    """SIGKILL after the claim, before the body: after a restart it is sent once."""
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("killed-after-claim", template)
    killed = ctx.killed(ctx.start_worker(crash_at="claimed"), SETTLE_SECONDS)
    held = ctx.intent(intent.id).status == SENDING
    early = ctx.received(intent.message_id)
    ctx.run_worker_until(lambda: ctx.settled(intent.id), SETTLE_SECONDS)
    after = ctx.intent(intent.id)
    bodies = ctx.relay.arrivals(intent.message_id)
    observed = (
        f"{'killed' if killed else 'not killed'} holding the lease: {held}; after the restart "
        f"{after.status}, {len(bodies)} body with its Message-ID (attempts: "
        f"{_outcomes(ctx, intent.id)})"
    )
    passed = killed and held and early == 0 and after.status == SUBMITTED and len(bodies) == 1
    yield Result(
        "killed-after-claim", template, "sent once after the restart, with the same Message-ID",
        observed, passed, time.monotonic() - started,
    )  # fmt: skip


def killed_after_body(ctx: DrillContext) -> Iterator[Result]:
    """SIGKILL after the relay accepted the body, before the outcome is recorded; per template:
    `hold` leaves it ambiguous and unsent again, `resend` sends it again as it was."""
    for template in ctx.templates():
        started = time.monotonic()
        policy = ctx.catalog.settings(template).ambiguity_policy
        intent = ctx.enqueue("killed-after-body", template, n=template)
        killed = ctx.killed(ctx.start_worker(crash_at="before_record"), SETTLE_SECONDS)
        stage = _stage_at_kill(ctx, intent.id)
        ctx.run_worker_until(lambda i=intent.id: ctx.settled(i), SETTLE_SECONDS)
        after = ctx.intent(intent.id)
        bodies = ctx.received(intent.message_id)
        with ctx.sessions() as session:
            same_key = session.scalar(
                select(func.count()).select_from(Intent)
                .where(Intent.idempotency_key == intent.idempotency_key)
            )  # fmt: skip
        requests = len(ctx.relay.arrivals(intent.message_id))
        expected, passed = _after_body(ctx, policy, after.status, bodies, requests, same_key)
        observed = (
            f"{'killed' if killed else 'not killed'} after the {ctx.accepted_word}, its attempt "
            f"at {stage}; then {after.status}, {_bodies(bodies)} with its Message-ID"
            f"{f' ({requests} requests)' if requests != bodies else ''}, "
            f"{same_key} intent with its key"
        )
        passed = passed and killed and stage == DATA_SENT
        expected = f"marked {DATA_SENT} before the body; {expected}"
        yield Result("killed-after-body", template, expected, observed, passed,
                     time.monotonic() - started)  # fmt: skip


def _bodies(count: int) -> str:
    return f"{count} {'body' if count == 1 else 'bodies'}"


def _after_body(ctx: DrillContext, policy: str, status: str, bodies: int, requests: int,
                same_key: int) -> tuple[str, bool]:  # fmt: skip
    """What the body-left drill expects of a template with `policy`, and whether it held."""
    if policy != RESEND:
        expected = f"{HOLD}: ambiguous, not sent again (1 body)"
        return expected, status == AMBIGUOUS and bodies == 1 and requests == 1
    if ctx.relay.honours_keys:
        expected = ("resend: sent again with the same key, which the provider deduplicates "
                    "(2 requests, 1 body, 1 intent)")  # fmt: skip
        return expected, status == SUBMITTED and requests == 2 and bodies == 1 and same_key == 1
    expected = "resend: sent again with the same Message-ID and key (2 bodies, 1 intent)"
    return expected, status == SUBMITTED and bodies == 2 and same_key == 1


def _stage_at_kill(ctx: DrillContext, intent_id: int) -> str:
    """How far the killed worker's attempt got, as the database holds it: the stage the
    lease-expiry sweep will read to decide whether the body may have left."""
    attempts = ctx.attempts(intent_id)
    return attempts[-1].stage if attempts else "no attempt"


def timeout_after_acceptance(ctx: DrillContext) -> Iterator[Result]:
    """The relay takes the body and never answers: ambiguous, then the reconciliation rule."""
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("answer-lost", template)
    ctx.relay.script(intent.recipient, ["stall", "250"])
    ctx.run_worker_until(lambda: ctx.settled(intent.id), SETTLE_SECONDS)
    after = ctx.intent(intent.id)
    bodies = ctx.received(intent.message_id)
    if ctx.relay.honours_keys:
        yield _answer_lost_deduplicated(ctx, template, after, bodies, started)
        return
    rule = reconciliation_rule(ctx.settings)
    policy = ctx.catalog.settings(template).ambiguity_policy
    if after.status != AMBIGUOUS:
        observed = f"{after.status} after the lost answer ({bodies} body)"
        passed = False
    else:
        settled_as, how = exercise_rule(ctx, after)
        observed = f"ambiguous, {bodies} body; {how}: {settled_as}"
        passed = bodies == 1 and settled_as == SUBMITTED
    yield Result(
        "answer-lost", template,
        f"{policy}: ambiguous, then {rule.describe()}", observed, passed,
        time.monotonic() - started,
    )  # fmt: skip


def _answer_lost_deduplicated(ctx: DrillContext, template: str, after: Intent, bodies: int,
                              started: float) -> Result:  # fmt: skip
    """A provider that deduplicates by idempotency key: the lost answer is asked again."""
    requests = len(ctx.relay.arrivals(after.message_id))
    attempts = _outcomes(ctx, after.id)
    observed = f"{after.status}; attempts: {attempts}; {requests} requests, {_bodies(bodies)}"
    passed = after.status == SUBMITTED and requests == 2 and bodies == 1
    return Result(
        "answer-lost", template,
        "retried with the same Idempotency-Key inside the provider's window; the provider "
        "answers with the first email: submitted, 1 body (2 requests)", observed, passed,
        time.monotonic() - started,
    )  # fmt: skip


def suppressed_before_body(ctx: DrillContext) -> Iterator[Result]:
    """The recipient is suppressed after the claim, while the envelope is under way: the
    mark before the body refuses, and the body never leaves."""
    if ctx.over_http:
        yield not_applicable(
            "suppressed-before-body",
            "an HTTP request has no envelope: nothing happens between the claim and the "
            "data_sent mark that the drill could hold, so there is no moment to suppress the "
            "recipient in (the mark's check of the suppression list is the same code as over "
            "SMTP, drilled there)",
        )
        return
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("suppressed-before-body", template)
    arrived, release = ctx.relay.hold_at_rcpt(intent.recipient)
    worker = ctx.start_worker(**HELD_TIMINGS)
    try:
        reached = wait_for(arrived.is_set, SETTLE_SECONDS)
        if reached:
            with ctx.sessions() as session:
                add_suppression(session, intent.recipient, actor=DRILL_ACTOR,
                                reason="drill: suppressed while its envelope is sent")  # fmt: skip
                session.commit()
        release.set()
        wait_for(lambda: ctx.settled(intent.id), SETTLE_SECONDS)
    finally:
        release.set()
        ctx.stop(worker)
    after = ctx.intent(intent.id)
    bodies = len(ctx.relay.arrivals(intent.message_id))
    observed = (
        f"{'suppressed at RCPT TO' if reached else 'RCPT TO never came'}; then {after.status}, "
        f"{bodies} {'body' if bodies == 1 else 'bodies'} at the relay"
    )
    yield Result(
        "suppressed-before-body", template,
        "the mark before the body refuses: suppressed, no body sent", observed,
        reached and after.status == SUPPRESSED and bodies == 0, time.monotonic() - started,
    )  # fmt: skip
