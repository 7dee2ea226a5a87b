"""The drills of identity and send-time policy: one key twice, two workers at once, a recipient
no longer eligible, a link past its max age, a message queued past its usefulness."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

from sqlalchemy import func, select

from console import outbox
from console.demo import casework
from console.drill.context import DrillContext, wait_for
from console.drill.report import Result
from console.models import Intent, utcnow
from console.ops.alerts import checks
from console.vocabulary import CANCELLED, DEAD, EXPIRED, SUBMITTED
from console.worker.decisions import EligibilityError, EligibilityPolicy

SETTLE_SECONDS = 15.0
TWO_WORKERS_INTENTS = 8
# The two-workers drill asks whether two live workers racing for one queue send each intent
# once: its workers get a lease and a timeout no busy machine outlasts, so that no send is
# taken back by the other worker's sweep (the drills of crashes and lost answers, which rest
# on the short ones, drill that).
RACE_TIMINGS = {"CONSOLE_LEASE_SECONDS": "120", "CONSOLE_SMTP_TIMEOUT_SECONDS": "60"}


def same_key_twice(ctx: DrillContext) -> Iterator[Result]:
    """The same key enqueued twice, the second time from two transactions at once."""
    started = time.monotonic()
    template = ctx.plain_template()
    first = ctx.enqueue("same-key", template)
    ids: list[int] = []

    def again() -> None:
        with ctx.sessions() as session:
            ids.append(
                outbox.enqueue(
                    session,
                    key=first.idempotency_key,
                    to=first.recipient,
                    template=template,
                    params=ctx.example_params(template),
                ).id
            )
            session.commit()  # fmt: skip

    threads = [threading.Thread(target=again) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    with ctx.sessions() as session:
        rows = session.scalar(
            select(func.count()).select_from(Intent)
            .where(Intent.idempotency_key == first.idempotency_key)
        )  # fmt: skip
    ctx.run_worker_until(lambda: ctx.settled(first.id), SETTLE_SECONDS)
    after = ctx.intent(first.id)
    bodies = ctx.received(first.message_id)
    passed = rows == 1 and set(ids) == {first.id} and bodies == 1 and after.status == SUBMITTED
    observed = (
        f"3 enqueues, {rows} intent; {after.status}, {bodies} body; provider id "
        f"{after.provider_message_id or 'none'}"
    )
    yield Result("same-key", template, "one intent, one send, one provider id", observed,
                 passed, time.monotonic() - started)  # fmt: skip


def two_workers(ctx: DrillContext) -> Iterator[Result]:
    """Two workers claiming the same queue at once: each intent sent once, one provider id."""
    started = time.monotonic()
    template = ctx.plain_template()
    workers = [ctx.start_worker(**RACE_TIMINGS), ctx.start_worker(**RACE_TIMINGS)]
    ids: list[int] = []
    try:  # both ticking and idle before the queue fills: their next polls race for it
        wait_for(lambda: all(ctx.ticked(w.pid) for w in workers), SETTLE_SECONDS)
        intents = [ctx.enqueue("two-workers", template, n=n) for n in range(TWO_WORKERS_INTENTS)]
        ids = [i.id for i in intents]
        wait_for(lambda: ctx.settled(*ids), SETTLE_SECONDS)
    finally:
        for worker in workers:
            ctx.stop(worker)
    rows = [ctx.intent(i) for i in ids]
    bodies = [ctx.received(row.message_id) for row in rows]
    provider_ids = {row.provider_message_id for row in rows if row.provider_message_id}
    accepted = [sum(1 for a in ctx.attempts(i) if a.outcome == "accepted") for i in ids]
    senders = {a.worker_id for i in ids for a in ctx.attempts(i)}
    passed = (
        all(row.status == SUBMITTED for row in rows) and bodies == [1] * len(ids)
        and accepted == [1] * len(ids) and len(provider_ids) == len(ids)
    )  # fmt: skip
    observed = (
        f"{sum(1 for r in rows if r.status == SUBMITTED)} of {len(ids)} submitted by "
        f"{len(senders)} workers; bodies a Message-ID: {sorted(set(bodies))}; "
        f"{len(provider_ids)} distinct provider ids"
    )
    yield Result("two-workers", template, "each intent sent once, one provider id each",
                 observed, passed, time.monotonic() - started)  # fmt: skip


def ineligible_recipient(ctx: DrillContext) -> Iterator[Result]:
    """The send-time eligibility check, per purpose; the case example when none is set."""
    module = ctx.settings.eligibility_module
    if not module:
        yield from _case_reassigned(ctx)
        return
    started = time.monotonic()
    try:
        policy = EligibilityPolicy.from_module(module)
    except EligibilityError as error:
        yield Result("ineligible", module, "the module's checks load", str(error), False,
                     time.monotonic() - started)  # fmt: skip
        return
    if not policy.checks:
        yield Result("ineligible", module, "at least one purpose checked",
                     f"{module} names no purpose", False, time.monotonic() - started)  # fmt: skip
    for purpose in sorted(policy.checks):
        yield _one_purpose(ctx, module, purpose)


def _one_purpose(ctx: DrillContext, module: str, purpose: str) -> Result:
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("ineligible", template, n=purpose, purpose=purpose)

    def decided() -> bool:
        row = ctx.intent(intent.id)
        return ctx.settled(intent.id) or (row.status_reason or "").startswith("eligibility check")

    ctx.run_worker_until(decided, SETTLE_SECONDS)
    after = ctx.intent(intent.id)
    bodies = ctx.received(intent.message_id)
    if after.status == CANCELLED:
        observed, passed = f"cancelled at send time: {after.status_reason}; {bodies} body", True
    elif after.status == SUBMITTED:
        observed, passed = "eligible on the scratch database: sent", bodies == 1
    else:
        observed = (
            f"the check for purpose {purpose!r} in {module} did not decide: "
            f"{after.status} ({after.status_reason or 'no reason'})"
        )
        passed = False
    ctx.cancel_unsent(intent.idempotency_key)
    return Result(
        "ineligible", f"{template} ({purpose})",
        f"{module} decides at send time: cancelled with its reason, or sent", observed, passed,
        time.monotonic() - started,
    )  # fmt: skip


def _case_reassigned(ctx: DrillContext) -> Iterator[Result]:
    started = time.monotonic()
    casework.create_tables(ctx.engine)
    case_id = random.randrange(10**6, 10**9)
    title = f"Private case title {ctx.run}"

    def assign(name: str, reviewer_id: int) -> Intent:
        with ctx.sessions() as session:
            _, intent = casework.assign_case(
                session, case_id=case_id, case_title=title, reviewer_id=reviewer_id,
                reviewer_name=name, reviewer_email=ctx.address("case", name),
            )  # fmt: skip
            session.commit()
            return ctx.intent(intent.id)

    first, second = assign("grace", 1), assign("linus", 2)  # reassigned while queued
    ctx.run_worker_until(
        lambda: ctx.settled(first.id, second.id), SETTLE_SECONDS,
        CONSOLE_ELIGIBILITY_MODULE="console.demo.casework",
    )  # fmt: skip
    old, new = ctx.intent(first.id), ctx.intent(second.id)
    to_old, to_new = ctx.relay.arrivals(first.message_id), ctx.relay.arrivals(second.message_id)
    leaked = any(title.encode() in a.content for a in to_new)
    passed = (
        old.status == CANCELLED and not to_old and new.status == SUBMITTED
        and len(to_new) == 1 and not leaked
    )  # fmt: skip
    observed = (
        f"first owner's notice {old.status} ({old.status_reason or 'no reason'}), "
        f"{len(to_old)} body; new owner's {new.status}, {len(to_new)} body; "
        f"case title {'in' if leaked else 'not in'} the text"
    )
    yield Result(
        "ineligible", f"{new.template} ({casework.PURPOSE}, example)",
        "the first owner's notice cancelled, the new owner's sent without private content",
        observed, passed, time.monotonic() - started,
    )  # fmt: skip


def link_past_max_age(ctx: DrillContext) -> Iterator[Result]:
    """Each template with ``max_age_seconds``: a message older than that expires unsent."""
    for template in ctx.templates():
        max_age = ctx.catalog.settings(template).max_age_seconds
        if max_age is None:
            continue
        started = time.monotonic()
        intent = ctx.enqueue("max-age", template, n=template)
        ctx.backdate(intent.id, max_age + 60)
        ctx.run_worker_until(lambda i=intent.id: ctx.settled(i), SETTLE_SECONDS)
        after = ctx.intent(intent.id)
        bodies = len(ctx.relay.arrivals(intent.message_id))
        yield Result(
            "max-age", template, f"expired unsent {max_age:g} s after it was queued",
            f"{after.status}, {bodies} body", after.status == EXPIRED and bodies == 0,
            time.monotonic() - started,
        )  # fmt: skip


def past_usefulness(ctx: DrillContext) -> Iterator[Result]:
    """A message queued longer than CONSOLE_MAX_AGE_SECONDS: expired or dead, and alerted."""
    started = time.monotonic()
    names = ctx.templates()
    ageless = [n for n in names if ctx.catalog.settings(n).max_age_seconds is None]
    template = (ageless or names)[0]
    max_age = ctx.settings.max_age_seconds
    intent = ctx.enqueue("too-old", template)
    ctx.relay.script(intent.recipient, ["451 4.3.0 Temporary local problem, try again later"])
    ctx.backdate(intent.id, max_age + 60)
    ctx.run_worker_until(lambda: ctx.settled(intent.id), SETTLE_SECONDS)
    after = ctx.intent(intent.id)
    with ctx.sessions() as session:
        alerts = checks.dead_letters(session, ctx.settings, utcnow())
    alert = alerts[0].summary if alerts else None
    if after.status == DEAD:
        passed = alert is not None
        observed = f"dead ({after.status_reason}); alert: {alert or 'none'}"
    else:
        passed = after.status == EXPIRED
        observed = f"{after.status} ({after.status_reason or 'no reason'})"
    yield Result(
        "too-old", template,
        f"older than {max_age:g} s: expired or dead, a dead letter raising its alert",
        observed, passed, time.monotonic() - started,
    )  # fmt: skip
