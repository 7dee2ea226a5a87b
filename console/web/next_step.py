"""What happens next to an intent, in words an operator reads: pure, no IO.

The worker gives an intent `CONSOLE_MAX_ATTEMPTS` attempts within
`CONSOLE_MAX_AGE_SECONDS` of its creation; a transient failure of the attempt
that reaches either cap makes it dead. A requeue keeps the count of attempts
made (it counts attempts), so a requeued intent that used its attempts, or
outlived the age cap, gets exactly one more try, unless the operator gave it N
more attempts: then the worker retries it until it made them
(``attempts_granted``), past both caps.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from console.core.readable import format_age
from console.vocabulary import PENDING, REQUEUEABLE_STATUSES, SENDING
from console.words import refusals

APPLICATION_SET = "set by the application"


@dataclasses.dataclass(frozen=True)
class Deadline:
    at: dt.datetime
    why: str  # "login-code max age 10 min", "set by the application"


@dataclasses.dataclass(frozen=True)
class NextStep:
    status: str
    attempts_made: int
    max_attempts: int
    next_attempt_at: dt.datetime | None  # pending: when the next attempt is due
    retries_stop_at: dt.datetime  # the age cap: no retry after this
    useful_until: Deadline | None  # the earlier of the application's expiry and the max age
    expires_at: dt.datetime | None  # what the application set
    requeue_attempts: int | None  # how many attempts a requeue gives; None: no requeue
    attempts_granted: int | None = None  # a requeue's "N more attempts": retried up to this
    attempts_remaining: int | None = None  # after such a requeue: attempts left, the next included
    capped: bool = False  # requeueable, and out of attempts or retry age: offer N more attempts
    too_late: Deadline | None = None  # requeueable, but this deadline passed: it would expire

    @property
    def template_too_late(self) -> bool:
        """A requeue would expire at once: the template's max age, not the application, says so."""
        return self.too_late is not None and self.too_late.why != APPLICATION_SET

    @property
    def attempt_cap(self) -> int:
        """The attempt count that ends the retries: the configured cap or the granted count."""
        return max(self.max_attempts, self.attempts_granted or 0)

    @property
    def next_attempt_number(self) -> int:
        return self.attempts_made + 1

    @property
    def waiting(self) -> bool:
        return self.status in (PENDING, SENDING)

    @property
    def next_is_last(self) -> bool:
        """The next attempt is the last: a transient failure of it makes the intent dead."""
        if self.attempts_remaining is not None:
            return self.attempts_remaining <= 1
        return self.next_attempt_number >= self.max_attempts or (
            self.next_attempt_at is not None and self.next_attempt_at >= self.retries_stop_at
        )

    @property
    def attempts_used_up(self) -> bool:
        return self.attempts_made >= self.attempt_cap


def next_step(
    *,
    status: str,
    attempt_count: int,
    created_at: dt.datetime,
    next_attempt_at: dt.datetime | None,
    expires_at: dt.datetime | None,
    template: str,
    template_max_age_seconds: float | None,
    max_attempts: int,
    max_age_seconds: float,
    now: dt.datetime,
    attempts_granted: int | None = None,
) -> NextStep:
    """Say what the worker will do with the intent next, and what a requeue would give it."""
    retries_stop_at = created_at + dt.timedelta(seconds=max_age_seconds)
    deadlines = []
    if template_max_age_seconds is not None:
        at = created_at + dt.timedelta(seconds=template_max_age_seconds)
        deadlines.append(Deadline(at, f"{template} max age {format_age(template_max_age_seconds)}"))
    if expires_at is not None:
        deadlines.append(Deadline(expires_at, APPLICATION_SET))
    cap = max(max_attempts, attempts_granted or 0)
    past_age_cap = now >= retries_stop_at
    useful_until = min(deadlines, key=lambda deadline: deadline.at) if deadlines else None
    requeue_attempts, capped, too_late = None, False, None
    if status in REQUEUEABLE_STATUSES:
        left = cap - attempt_count
        capped = left < 1 or past_age_cap
        requeue_attempts = 1 if capped else left
        too_late = useful_until if useful_until and useful_until.at <= now else None
    return NextStep(
        status=status,
        attempts_made=attempt_count,
        max_attempts=max_attempts,
        next_attempt_at=next_attempt_at if status == PENDING else None,
        retries_stop_at=retries_stop_at,
        useful_until=useful_until,
        expires_at=expires_at,
        requeue_attempts=requeue_attempts,
        attempts_granted=attempts_granted,
        attempts_remaining=_granted_left(
            status, attempt_count, attempts_granted, max_attempts, past_age_cap
        ),  # fmt: skip
        capped=capped,
        too_late=too_late,
    )


def _granted_left(
    status: str, made: int, granted: int | None, max_attempts: int, past_age_cap: bool
) -> int | None:
    """Attempts left to a pending intent an operator gave more (the next one included)."""
    if granted is None or status not in (PENDING, SENDING):
        return None
    # past the age cap the grant alone counts; the next attempt is made in any case
    cap = granted if past_age_cap else max(max_attempts, granted)
    return max(cap - made, 0 if status == SENDING else 1)


def too_late_words(step: NextStep) -> str:
    """Why a requeue cannot send the intent any more (for a step with `too_late`)."""
    deadline = step.too_late
    return refusals.sentence("requeue_too_late", until=deadline.at, why=deadline.why)
