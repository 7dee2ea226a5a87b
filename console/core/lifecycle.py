"""Where an intent goes next (docs/architecture.md, the send loop), decided from facts alone.

Three moments decide an intent's fate: the claim (is it still worth sending?),
the end of an attempt (what did the outcome mean?), and the lease-expiry sweep
(a worker went silent: could it have handed the message over?).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random as _random
from collections.abc import Callable

from console.core.backoff import Backoff
from console.core.outcomes import Classification
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CANCELLED,
    DEAD,
    EXPIRED,
    FAILED,
    HOLD,
    PENDING,
    PERMANENT,
    RESEND,
    SUBMITTED,
    SUPPRESSED,
    TRANSIENT,
)


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """The caps and backoff that apply to every intent."""

    backoff: Backoff
    max_attempts: int
    max_age_seconds: float


@dataclasses.dataclass(frozen=True)
class TemplateRules:
    """What an intent's template says about lateness and unknown outcomes."""

    ambiguity_policy: str = HOLD
    max_age_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class IntentFacts:
    """The facts about one intent that its fate depends on."""

    created_at: dt.datetime
    expires_at: dt.datetime | None
    attempts_made: int  # including the attempt being decided
    rules: TemplateRules = TemplateRules()
    # an operator's requeue of a capped intent: the attempt count up to which it is retried
    attempts_granted: int | None = None

    def attempt_cap(self, policy: RetryPolicy) -> int:
        """The attempt count that makes a failure for now final: the policy's or the granted."""
        return max(policy.max_attempts, self.attempts_granted or 0)

    @property
    def granted_attempts_left(self) -> bool:
        """Attempts an operator granted remain: the age cap does not end them."""
        return self.attempts_granted is not None and self.attempts_made < self.attempts_granted


@dataclasses.dataclass(frozen=True)
class Decision:
    """The next status, when to try again (for pending) and why."""

    status: str
    reason: str | None = None
    next_attempt_at: dt.datetime | None = None
    alert: bool = False  # dead letters and configuration errors are logged at ERROR


def useful_until(facts: IntentFacts) -> dt.datetime | None:
    """Return when the mail stops being worth sending: expires_at or the template's max age."""
    limits = []
    if facts.expires_at is not None:
        limits.append(facts.expires_at)
    if facts.rules.max_age_seconds is not None:
        limits.append(facts.created_at + dt.timedelta(seconds=facts.rules.max_age_seconds))
    return min(limits) if limits else None


def decide_at_claim(
    facts: IntentFacts,
    now: dt.datetime,
    *,
    suppressed: bool,
    ineligible_reason: str | None,
) -> Decision | None:
    """Return the terminal decision for an intent that must not be sent, else None."""
    deadline = useful_until(facts)
    if deadline is not None and now >= deadline:
        return Decision(EXPIRED, f"not sent: no longer useful after {deadline.isoformat()}")
    if suppressed:
        return Decision(SUPPRESSED, "recipient is on the suppression list")
    if ineligible_reason is not None:
        return Decision(CANCELLED, f"not eligible: {ineligible_reason}")
    return None


def decide_after_attempt(
    classification: Classification,
    facts: IntentFacts,
    now: dt.datetime,
    policy: RetryPolicy,
    random: Callable[[], float] = _random.random,
) -> Decision:
    """Return where the intent goes after an attempt with this outcome."""
    outcome, reason = classification.outcome, classification.reason
    if outcome == ACCEPTED:
        return Decision(SUBMITTED, reason)
    if outcome == PERMANENT:
        return Decision(FAILED, reason, alert=classification.alert)
    if outcome == AMBIGUOUS and facts.rules.ambiguity_policy != RESEND:
        return Decision(AMBIGUOUS, reason, alert=classification.alert)
    if outcome not in (TRANSIENT, AMBIGUOUS):
        raise ValueError(f"unknown outcome {outcome!r}")
    return _retry_or_give_up(classification, facts, now, policy, random)


def _retry_or_give_up(
    classification: Classification,
    facts: IntentFacts,
    now: dt.datetime,
    policy: RetryPolicy,
    random: Callable[[], float],
) -> Decision:
    reason = classification.reason
    if facts.attempts_made >= facts.attempt_cap(policy):
        return Decision(
            DEAD, f"gave up after {facts.attempts_made} attempts; last: {reason}", alert=True
        )
    age_seconds = (now - facts.created_at).total_seconds()
    if age_seconds >= policy.max_age_seconds and not facts.granted_attempts_left:
        return Decision(DEAD, f"gave up after {age_seconds:.0f} s; last: {reason}", alert=True)
    delay_seconds = policy.backoff.delay_seconds(facts.attempts_made, random)
    delay_seconds = honoured_retry_after(delay_seconds, classification, policy.backoff)
    next_attempt_at = now + dt.timedelta(seconds=delay_seconds)
    deadline = useful_until(facts)
    if deadline is not None and next_attempt_at >= deadline:
        return Decision(EXPIRED, f"no longer useful by the next attempt; last: {reason}")
    return Decision(PENDING, reason, next_attempt_at, alert=classification.alert)


def honoured_retry_after(
    delay_seconds: float, classification: Classification, backoff: Backoff
) -> float:
    """The backoff's delay, or the provider's longer Retry-After up to the backoff's cap."""
    asked = classification.retry_after_seconds
    if asked is None or math.isnan(asked):
        return delay_seconds
    return max(delay_seconds, min(asked, backoff.cap_seconds))


def classify_lease_expiry(stage_reached: str, handed_over: bool) -> Classification:
    """Say what a silent worker's attempt means, from the last stage it recorded."""
    if handed_over:
        return Classification(AMBIGUOUS, f"lease expired after reaching {stage_reached}")
    return Classification(TRANSIENT, f"lease expired at {stage_reached}, before any handover")
