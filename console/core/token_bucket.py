"""The send rate as a token bucket shared by every worker (CONSOLE_SEND_RATE). Pure.

A bucket holds up to ``burst`` tokens and gains ``rate`` tokens a second; each
message sent takes one. A claim asks for as many tokens as it could lease and
gets at most what the bucket holds; the claim fills the critical lane first, and
bulk intents leave one token in the bucket (when the burst allows two), so a login
code never waits behind a bulk backlog for longer than one token interval.

A throttling reply from the provider halves the effective rate (at most once a
second: the replies to sends already in flight say the same thing) for
``HOLD_SECONDS``; then the rate climbs back by a tenth of the configured rate
every ``STEP_SECONDS`` until it is the configured one again.

Times are seconds since the epoch (floats). ``console.store.send_budget`` runs
the same arithmetic in one SQL statement; tests check that both agree.
"""

from __future__ import annotations

import dataclasses
import math

HOLD_SECONDS = 60.0  # how long a throttling reply halves the rate
STEP_SECONDS = 10.0  # then, every this many seconds ...
STEP_FRACTION = 0.1  # ... the rate climbs back by this share of the configured rate
MIN_FACTOR = 1 / 64  # the rate never falls below this share of the configured rate
HALVE_AT_MOST_EVERY_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class BucketPolicy:
    """The configured rate (messages a second) and burst (tokens the bucket holds)."""

    rate: float
    burst: float

    @classmethod
    def of(cls, rate: float, burst: float | None = None) -> BucketPolicy:
        """`burst` defaults to one second's worth, and is never below one message."""
        return cls(rate, max(1.0, burst if burst is not None else rate))

    @property
    def critical_reserve(self) -> float:
        """Tokens a bulk claim leaves for the critical lane."""
        return 1.0 if self.burst >= 2 else 0.0


@dataclasses.dataclass(frozen=True)
class Bucket:
    """The shared state: tokens at `refilled_at`, and the last halving (factor, when)."""

    tokens: float
    refilled_at: float
    factor: float = 1.0  # share of the configured rate right after the last halving
    slowed_at: float = 0.0


def start(now: float) -> Bucket:
    """The bucket the first claim ever makes: empty, filling at the rate from `now`.

    Nothing is known of what was sent just before (an older version, a restart, a
    backlog met by cold processes whose first sends lag their claim): a full bucket
    would let a burst bunch up with the next second's sends at the provider."""
    return Bucket(tokens=0.0, refilled_at=now)


def rate_factor(bucket: Bucket, now: float) -> float:
    """The share of the configured rate in force at `now`."""
    steps = max(0, math.floor((now - bucket.slowed_at - HOLD_SECONDS) / STEP_SECONDS) + 1)
    return min(1.0, bucket.factor + STEP_FRACTION * steps)


def effective_rate(policy: BucketPolicy, bucket: Bucket, now: float) -> float:
    """Messages a second the bucket gains at `now`."""
    return policy.rate * rate_factor(bucket, now)


def refill(policy: BucketPolicy, bucket: Bucket, now: float) -> Bucket:
    """The bucket at `now`: tokens gained since `refilled_at`, up to the burst."""
    gained = max(0.0, now - bucket.refilled_at) * effective_rate(policy, bucket, now)
    tokens = min(policy.burst, bucket.tokens + gained)
    return dataclasses.replace(bucket, tokens=tokens, refilled_at=max(now, bucket.refilled_at))


def take(policy: BucketPolicy, bucket: Bucket, now: float, want: int) -> tuple[Bucket, int]:
    """Take up to `want` tokens; return the bucket and how many were taken."""
    bucket = refill(policy, bucket, now)
    taken = min(want, math.floor(bucket.tokens))
    return dataclasses.replace(bucket, tokens=bucket.tokens - taken), taken


def bulk_allowance(policy: BucketPolicy, taken: int, left: float) -> int:
    """Of `taken` tokens (`left` still in the bucket), how many the bulk lanes may use:
    all but the critical reserve, which stays in the bucket for a login code to come."""
    return max(0, min(taken, math.floor(taken + left - policy.critical_reserve)))


def give_back(policy: BucketPolicy, bucket: Bucket, tokens: int) -> Bucket:
    """Return tokens a claim took but did not use."""
    return dataclasses.replace(bucket, tokens=min(policy.burst, bucket.tokens + tokens))


def halve(bucket: Bucket, now: float) -> Bucket:
    """The provider throttled us: half the rate in force, an empty bucket, from `now`."""
    if now - bucket.slowed_at < HALVE_AT_MOST_EVERY_SECONDS:
        return bucket
    factor = max(MIN_FACTOR, rate_factor(bucket, now) / 2)
    return Bucket(tokens=0.0, refilled_at=now, factor=factor, slowed_at=now)


def seconds_until_tokens(policy: BucketPolicy, bucket: Bucket, now: float, tokens: float) -> float:
    """Roughly how long until the bucket holds `tokens` (0 when it does already)."""
    missing = tokens - refill(policy, bucket, now).tokens
    return max(0.0, missing / effective_rate(policy, bucket, now))


@dataclasses.dataclass(frozen=True)
class DailyQuota:
    """Messages a rolling 24 hours may hold; the last `critical_reserve` are critical only."""

    limit: int
    critical_reserve: int

    @classmethod
    def of(cls, limit: int, critical_reserve: int | None = None) -> DailyQuota:
        """`critical_reserve` defaults to 5 % of the quota, rounded up."""
        reserve = math.ceil(limit * 0.05) if critical_reserve is None else critical_reserve
        return cls(limit, min(limit, reserve))

    def left(self, sent: int) -> tuple[int, int]:
        """What the critical and the bulk lane may still send, `sent` being sent already."""
        return max(0, self.limit - sent), max(0, self.limit - self.critical_reserve - sent)
