"""The drills of the relay's replies: 4yz then 250, 5yz, ``550 5.1.1``, a throttling domain."""

from __future__ import annotations

import time
from collections.abc import Iterator

from sqlalchemy import select

from console.drill.context import DRILL_TIMINGS, DrillContext
from console.drill.provider_play import THROTTLED
from console.drill.report import Result, not_applicable
from console.state_tables import DomainDeferral
from console.store.suppressions import is_suppressed
from console.vocabulary import FAILED, PENDING, SUBMITTED

SETTLE_SECONDS = 15.0
TEMPORARY = "451 4.3.0 Temporary local problem, try again later"
PERMANENT = "550 5.7.1 Message rejected by policy"
UNKNOWN_USER = "550 5.1.1 Mailbox unavailable: user unknown"
THROTTLING = "421 4.7.0 Too many messages from you, slow down"


def retry_after_4yz(ctx: DrillContext) -> Iterator[Result]:
    """451, then 250: retried after a back-off, with the same Message-ID."""
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("4yz-then-250", template)
    temporary = THROTTLED if ctx.over_http else TEMPORARY
    ctx.relay.script(intent.recipient, [temporary, "250"])
    ctx.run_worker_until(lambda: ctx.settled(intent.id), SETTLE_SECONDS)
    after, attempts = ctx.intent(intent.id), ctx.attempts(intent.id)
    arrivals = ctx.relay.arrivals(intent.message_id)
    outcomes = [a.outcome for a in attempts]
    waited = None
    if len(attempts) >= 2 and attempts[0].finished_at and attempts[1].started_at:
        waited = (attempts[1].started_at - attempts[0].finished_at).total_seconds()
    floor = float(DRILL_TIMINGS["CONSOLE_RETRY_FLOOR_SECONDS"])
    passed = (
        after.status == SUBMITTED and outcomes == ["transient", "accepted"]
        and len(arrivals) == 2 and waited is not None and waited >= floor
    )  # fmt: skip
    wait_text = "no second attempt" if waited is None else f"retried {waited:.2f} s later"
    observed = (
        f"{after.status}; attempts: {', '.join(str(o) for o in outcomes) or 'none'}; "
        f"{wait_text}; {len(arrivals)} bodies, all with its Message-ID"
    )
    first = "the provider's 429 (Retry-After: 1), then 200" if ctx.over_http else "451, then 250"
    yield Result(
        "4yz-then-250", template,
        f"{first}: retried after the back-off (at least {floor:g} s here) with the same "
        "Message-ID, then submitted", observed, passed, time.monotonic() - started,
    )  # fmt: skip


def permanent_5yz(ctx: DrillContext) -> Iterator[Result]:
    """A 5yz after the body: failed at once, never retried."""
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("5yz", template)
    ctx.relay.script(intent.recipient, [PERMANENT, "250"])  # over HTTP: the provider's refusal
    ctx.run_worker_until(
        lambda: ctx.settled(intent.id) or len(ctx.attempts(intent.id)) >= 2, SETTLE_SECONDS
    )
    after, attempts = ctx.intent(intent.id), ctx.attempts(intent.id)
    outcomes = ", ".join(str(a.outcome) for a in attempts) or "none"
    passed = after.status == FAILED and len(attempts) == 1
    retried = f" (retried: {len(attempts)} attempts)" if len(attempts) > 1 else ""
    refusal = _refusal(ctx, intent.message_id)
    observed = f"{after.status} after {refusal}; attempts: {outcomes}{retried}"
    ctx.cancel_unsent(intent.idempotency_key)
    yield Result("5yz", template, f"failed after one attempt ({refusal}), never retried",
                 observed, passed, time.monotonic() - started)  # fmt: skip


def _refusal(ctx: DrillContext, message_id: str) -> str:
    """The refusal the relay gave, e.g. ``550``, or the provider's ``422 (postmark)``."""
    if not ctx.over_http:
        return PERMANENT[:3]
    answers = [a.answer for a in ctx.relay.arrivals(message_id)]
    status = answers[0].split()[0] if answers else "no"
    return f"{status} ({ctx.relay.provider}'s documented permanent refusal)"


def refused_mailbox(ctx: DrillContext) -> Iterator[Result]:
    """``550 5.1.1``: failed, and the address suppressed (unless the deployment says not)."""
    if ctx.over_http:
        yield not_applicable(
            "550-5.1.1",
            "a provider's API takes the request for an unknown mailbox and reports it later "
            "in a bounce event, which suppresses the address (docs/provider-events.md); "
            "its send answer names no mailbox",
        )
        return
    started = time.monotonic()
    template = ctx.plain_template()
    intent = ctx.enqueue("550-5.1.1", template)
    ctx.relay.script(intent.recipient, [UNKNOWN_USER, "250"])
    ctx.run_worker_until(
        lambda: ctx.settled(intent.id) or len(ctx.attempts(intent.id)) >= 2, SETTLE_SECONDS
    )
    after = ctx.intent(intent.id)
    with ctx.sessions() as session:
        suppressed = is_suppressed(session, intent.recipient)
    wanted = ctx.settings.suppress_refused_mailboxes
    expected = (
        "failed, the address suppressed"
        if wanted
        else ("failed, the address not suppressed (CONSOLE_SUPPRESS_REFUSED_MAILBOXES=false)")
    )
    observed = f"{after.status}; the address {'is' if suppressed else 'is not'} suppressed"
    passed = after.status == FAILED and suppressed == wanted
    ctx.cancel_unsent(intent.idempotency_key)
    yield Result("550-5.1.1", template, expected, observed, passed, time.monotonic() - started)


def throttling_domain(ctx: DrillContext) -> Iterator[Result]:
    """A domain answering 421 ``4.7.0`` again and again is deferred; other domains are not."""
    if ctx.over_http:
        yield not_applicable(
            "421-domain",
            "a provider's API throttles the account (its 429, drilled by 4yz-then-250), not "
            "a recipient domain; the per-domain back-off reads an SMTP relay's replies",
        )
        return
    started = time.monotonic()
    template = ctx.plain_template()
    run = ctx.settings.domain_backoff_run
    throttled_domain = f"throttled-{ctx.run}.example.net"
    calm_domain = f"calm-{ctx.run}.example.org"
    throttled = [
        ctx.enqueue("421", template, n=f"t{n}", to=ctx.address("421", n, throttled_domain))
        for n in range(run + 2)
    ]
    calm = [
        ctx.enqueue("421", template, n=f"c{n}", to=ctx.address("421", n, calm_domain))
        for n in range(2)
    ]
    for intent in throttled:
        ctx.relay.script(intent.recipient, [THROTTLING])

    def deferred(domain: str) -> DomainDeferral | None:
        with ctx.sessions() as session:
            row = session.scalar(select(DomainDeferral).where(DomainDeferral.domain == domain))
            if row is not None:
                session.expunge(row)
            return row

    ctx.run_worker_until(
        lambda: deferred(throttled_domain) is not None and ctx.settled(*(i.id for i in calm)),
        SETTLE_SECONDS,
    )
    deferral, calm_deferral = deferred(throttled_domain), deferred(calm_domain)
    statuses = [ctx.intent(i.id).status for i in throttled]
    calm_sent = sum(1 for i in calm if ctx.intent(i.id).status == SUBMITTED)
    answered = sum(1 for a in ctx.relay.arrivals() if a.recipient.endswith(throttled_domain))
    passed = (
        deferral is not None and calm_deferral is None and calm_sent == len(calm)
        and all(status == PENDING for status in statuses)
    )  # fmt: skip
    observed = (
        f"{answered} bodies answered 421; {throttled_domain} "
        f"{'deferred' if deferral else 'not deferred'}, its mail "
        f"{', '.join(sorted(set(statuses)))}; {calm_sent} of {len(calm)} to {calm_domain} sent"
    )
    ctx.cancel_unsent(*(i.idempotency_key for i in throttled))
    yield Result(
        "421-domain", template,
        f"the domain deferred after {run} throttling replies, its mail kept pending; "
        "another domain's mail sent", observed, passed, time.monotonic() - started,
    )  # fmt: skip
