"""The provider's limits in the claim: the shared send rate and the rolling daily quota.

Before ``lock_due`` the worker asks ``lane_limits`` how many intents each lane may
claim (tokens taken from the shared bucket, what the quota leaves); after the lease
``settle`` gives back the tokens not used and counts what was leased. With neither
limit configured the worker has no ``SendBudget`` and the claim runs no statement
for it. A throttling reply calls ``throttled``, which halves the shared rate.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping

from sqlalchemy.orm import Session

from console.config import Settings
from console.core.token_bucket import BucketPolicy, DailyQuota, bulk_allowance
from console.store import send_budget
from console.vocabulary import CRITICAL, LANES

log = logging.getLogger(__name__)
DAY = 24 * 3600  # seconds


@dataclasses.dataclass
class Granted:
    """What one claim took: tokens (None: no rate), and whether bulk's quota is spent."""

    tokens: int | None = None
    quota_reached: bool = False

    def batch_limit(self, batch_size: int) -> int:
        """How many intents the claim may lock in all."""
        return batch_size if self.tokens is None else min(batch_size, self.tokens)


class SendBudget:
    """One worker's door to the shared budget."""

    def __init__(self, rate: BucketPolicy | None, quota: DailyQuota | None) -> None:
        self.rate = rate
        self.quota = quota

    @classmethod
    def from_settings(cls, settings: Settings) -> SendBudget | None:
        """The configured budget, or None when no limit is set (the claim then costs nothing)."""
        rate = quota = None
        if settings.send_rate is not None:
            rate = BucketPolicy.of(settings.send_rate, settings.send_burst)
        if settings.send_daily_quota is not None:
            quota = DailyQuota.of(settings.send_daily_quota, settings.send_daily_critical_reserve)
        return cls(rate, quota) if rate or quota else None

    def lane_limits(
        self, session: Session, now: dt.datetime, limits: Mapping[str, int], batch_size: int
    ) -> tuple[dict[str, int], Granted]:
        """Lower each lane's limit to what the quota leaves and the bucket grants."""
        at = now.timestamp()
        limits = dict(limits)
        granted = Granted()
        if self.quota is not None:
            if self.rate is None:
                send_budget.lock_budget(session, at)
            else:  # the bucket's row lock serialises the count; take nothing yet
                send_budget.take_tokens(session, self.rate, at, 0)
            critical_left, bulk_left = self.quota.left(send_budget.sent_since(session, at - DAY))
            for lane in LANES:
                limits[lane] = min(limits[lane], critical_left if lane == CRITICAL else bulk_left)
            granted.quota_reached = bulk_left == 0
        if self.rate is not None:
            want = min(sum(limits.values()), batch_size)
            taken, left = send_budget.take_tokens(session, self.rate, at, want)
            granted.tokens = taken
            bulk = bulk_allowance(self.rate, taken, left)
            for lane in LANES:  # critical fills first (lock_due's order), bulk keeps the reserve
                limits[lane] = min(limits[lane], taken if lane == CRITICAL else bulk)
        return limits, granted

    def settle(
        self,
        session: Session,
        now: dt.datetime,
        granted: Granted,
        leased_by_lane: Mapping[str, int],
    ) -> None:
        """Give back the tokens not used and count what was leased (before the commit)."""
        if self.rate is not None and granted.tokens is not None:
            unused = granted.tokens - sum(leased_by_lane.values())
            send_budget.give_back(session, self.rate, unused)
        if self.quota is not None:
            send_budget.count_sent(session, now.timestamp(), sum(leased_by_lane.values()))

    def throttled(self, session: Session, now: dt.datetime) -> None:
        """The provider said we send too fast: halve the shared rate; commit."""
        halved = send_budget.halve_rate(session.connection(), now.timestamp())
        session.commit()
        if halved:
            log.warning("send rate halved: the provider throttled a send")
