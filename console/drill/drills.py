"""The drills, by name, in the order they run (the busiest relay last, so a failure-heavy
drill never opens a lane's breaker on the ones after it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from console.drill import crashes, policies, replies
from console.drill.context import DrillContext
from console.drill.report import Result


@dataclasses.dataclass(frozen=True)
class Drill:
    name: str
    what: str
    run: Callable[[DrillContext], Iterator[Result]]


DRILLS = (
    Drill("rollback", "the business transaction rolls back after enqueue()", crashes.rollback),
    Drill("commit-then-die", "commit, then the process dies before any wake-up",
          crashes.commit_then_die),
    Drill("killed-after-claim", "the worker is SIGKILLed after the claim, before the body",
          crashes.killed_after_claim),
    Drill("killed-after-body", "the worker is SIGKILLed after the body left, before the record",
          crashes.killed_after_body),
    Drill("suppressed-before-body", "the recipient is suppressed between the claim and the body",
          crashes.suppressed_before_body),
    Drill("answer-lost", "the relay takes the body, the answer never comes",
          crashes.timeout_after_acceptance),
    Drill("same-key", "the same key enqueued twice", policies.same_key_twice),
    Drill("two-workers", "two workers claiming at once", policies.two_workers),
    Drill("ineligible", "the recipient becomes ineligible while queued",
          policies.ineligible_recipient),
    Drill("max-age", "a link past its template's max age", policies.link_past_max_age),
    Drill("too-old", "a message queued past its usefulness", policies.past_usefulness),
    Drill("4yz-then-250", "a temporary failure, then acceptance", replies.retry_after_4yz),
    Drill("5yz", "a permanent failure", replies.permanent_5yz),
    Drill("550-5.1.1", "the mailbox does not exist", replies.refused_mailbox),
    Drill("421-domain", "a domain answering 421 4.7.0 again and again",
          replies.throttling_domain),
)  # fmt: skip
NAMES = tuple(drill.name for drill in DRILLS)
