"""Every figure of the dashboard, gathered once per page in a handful of indexed queries."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy.orm import Session

from console.models import utcnow
from console.store import dashboard_queries, heartbeats, queue_figures
from console.store.dashboard_queries import ChartBar
from console.store.sender_rates import CachedRates, SenderRate, sender_rates
from console.vocabulary import AMBIGUOUS, DEAD, LANES


@dataclasses.dataclass(frozen=True)
class Dashboard:
    now: dt.datetime
    counts: dict[tuple[str, str], int]  # (status, lane) -> intents
    oldest_pending: dict[str, dt.datetime | None]  # lane -> created_at of the oldest
    age_buckets: dict[str, dict[str, int]]  # lane -> bucket name -> pending intents
    chart: list[ChartBar]
    last_tick_at: dt.datetime | None
    sender_rates: dict[tuple[str, str], SenderRate]  # (kind, window) -> rate

    def status_total(self, status: str) -> int:
        return sum(count for (s, _), count in self.counts.items() if s == status)

    def lane_total(self, lane: str) -> int:
        return sum(count for (_, la), count in self.counts.items() if la == lane)

    @property
    def ambiguous(self) -> int:
        return self.status_total(AMBIGUOUS)

    @property
    def dead(self) -> int:
        return self.status_total(DEAD)

    def oldest_pending_seconds(self, lane: str) -> float | None:
        oldest = self.oldest_pending.get(lane)
        return None if oldest is None else max(0.0, (self.now - oldest).total_seconds())


def dashboard(
    session: Session, now: dt.datetime | None = None, *, rates: CachedRates | None = None
) -> Dashboard:
    """Gather every figure of the dashboard in a handful of indexed queries.

    The sender rates come from `rates` when given (counted at most a minute ago).
    """
    now = now or utcnow()
    return Dashboard(
        now=now,
        counts=dashboard_queries.status_lane_counts(session, now),
        oldest_pending=queue_figures.oldest_pending_by_lane(session),
        age_buckets={
            lane: dashboard_queries.pending_age_buckets(session, lane, now) for lane in LANES
        },
        chart=dashboard_queries.attempt_chart(session, now),
        last_tick_at=heartbeats.last_worker_tick_at(session),
        sender_rates=rates.get(session, now) if rates else sender_rates(session, now),
    )
