"""The send budget as figures (dashboard, /metrics), a notice and the quota's alert.

* ``budget_figures`` — the configured and effective rate, the tokens left, the
  messages of the rolling 24 hours against the quota, and until when bulk waits;
* ``quota_notices`` — the dashboard's line while the quota holds bulk mail back;
* ``quota_conditions`` — ``send_quota_reached``, a check of the alert cycle: it
  fires once when bulk claiming stops and clears when the window frees up;
* ``BudgetCollector`` — the figures as ``/metrics`` gauges.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from console.config import Settings
from console.core import token_bucket as tb
from console.models import utcnow
from console.ops.alerts.condition import Condition
from console.store import send_budget

SEND_QUOTA_REACHED = "send_quota_reached"
DAY = 24 * 3600  # seconds


@dataclasses.dataclass(frozen=True)
class BudgetFigures:
    rate: float | None = None  # configured, messages a second; None: unlimited
    effective_rate: float | None = None
    tokens: float | None = None
    sent_24h: int | None = None  # None: no quota configured
    quota: int | None = None
    critical_reserve: int | None = None
    bulk_waits_until: dt.datetime | None = None  # the quota is reached until then

    @property
    def configured(self) -> bool:
        return self.rate is not None or self.quota is not None


def budget_figures(session: Session, settings: Settings, now: dt.datetime) -> BudgetFigures:
    """Read the shared budget at `now`; no statement when no limit is configured."""
    values: dict = {}
    at = now.timestamp()
    if settings.send_rate is not None:
        policy = tb.BucketPolicy.of(settings.send_rate, settings.send_burst)
        bucket = send_budget.read_bucket(session) or tb.start(at)  # as the first claim will
        values.update(rate=policy.rate, effective_rate=tb.effective_rate(policy, bucket, at))
        values["tokens"] = tb.refill(policy, bucket, at).tokens
    if settings.send_daily_quota is not None:
        quota = tb.DailyQuota.of(settings.send_daily_quota, settings.send_daily_critical_reserve)
        sent = send_budget.sent_since(session, at - DAY)
        values.update(sent_24h=sent, quota=quota.limit, critical_reserve=quota.critical_reserve)
        if quota.left(sent)[1] == 0:
            oldest = send_budget.oldest_hour_since(session, at - DAY)
            if oldest is not None:
                until = oldest + send_budget.HOUR + DAY
                values["bulk_waits_until"] = dt.datetime.fromtimestamp(until, dt.UTC)
    return BudgetFigures(**values)


def quota_notices(figures: BudgetFigures) -> list[str]:
    """The dashboard's line while the daily quota holds bulk mail back."""
    if figures.bulk_waits_until is None:
        return []
    return [
        f"The daily send quota is reached ({figures.sent_24h} of {figures.quota} in 24 h): "
        f"bulk mail waits until {figures.bulk_waits_until:%Y-%m-%d %H:%M} UTC; "
        f"the critical lane keeps {figures.critical_reserve}"
    ]


def quota_conditions(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """``send_quota_reached`` while bulk claiming is stopped by the daily quota."""
    if settings.send_daily_quota is None:
        return []
    figures = budget_figures(session, settings, now)
    if figures.bulk_waits_until is None:
        return []
    summary = quota_notices(figures)[0]
    details = {
        "sent_24h": figures.sent_24h,
        "quota": figures.quota,
        "until": figures.bulk_waits_until.isoformat(timespec="seconds"),
    }
    return [Condition(SEND_QUOTA_REACHED, summary, details)]


class BudgetCollector(Collector):
    """The budget's figures as Prometheus gauges, read from the database at each scrape."""

    def __init__(self, session_factory: Callable[[], Session], settings: Settings) -> None:
        self._session_factory = session_factory
        self._settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._session_factory() as session:
            figures = budget_figures(session, self._settings, utcnow())
        gauges = [
            ("console_send_rate", "Configured send rate, messages a second.", figures.rate),
            ("console_send_rate_effective", "Send rate in force after throttling, messages a "
             "second.", figures.effective_rate),
            ("console_send_tokens", "Tokens left in the shared send bucket.", figures.tokens),
            ("console_send_daily_sent", "Messages claimed in the rolling 24 hours.",
             figures.sent_24h),
            ("console_send_daily_quota", "Configured daily send quota.", figures.quota),
        ]  # fmt: skip
        for name, documentation, value in gauges:
            if value is not None:
                yield GaugeMetricFamily(name, documentation, value=value)


def register_collector(registry, session_factory: Callable[[], Session], settings: Settings):
    """Add the budget's gauges to `registry` when a rate or a quota is configured."""
    if settings.send_rate is not None or settings.send_daily_quota is not None:
        registry.register(BudgetCollector(session_factory, settings))
    return registry
