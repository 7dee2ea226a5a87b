"""What people experience: how long mail takes to leave, and mail that may have left twice.

- ``/metrics``: ``console_enqueue_to_accepted_seconds{lane,template}`` (a histogram
  of the time from enqueue to the provider's acceptance) and
  ``console_possible_duplicate_sends_total{cause}``. Both are read from the
  database by the scraped process, for everything any worker did since that
  process started: every process reports every worker's mail, so aggregate with
  ``max()`` over instances, not ``sum()``. ``template`` is one of the catalog's
  templates (a bounded set), else ``other``.
- the dashboard: p50 and p99 of the last hour per lane beside the lane's target,
  and the possible duplicates of the last 24 hours by cause (``DashboardFigures``).
- the alert ``latency:<lane>``: the last hour's p99 has stayed over its target
  for 10 minutes (each intent judged against its template's
  ``latency_target_seconds``, else its lane's).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from console.config import Settings
from console.mail.catalog import TemplateCatalog, default_catalog
from console.models import utcnow
from console.ops.alerts.condition import Condition
from console.store import duplicate_sends
from console.store import latency as figures
from console.vocabulary import BULK, CRITICAL, LANES

LATENCY_BUCKETS_SECONDS = (
    0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    21600.0,
)  # fmt: skip
SETTLE_SECONDS = 30.0  # rows this recent may still be committing: counted at the next scrape
PAGE_ROWS = 5000
PAGES_PER_SCRAPE = 20
OTHER_TEMPLATE = "other"
LATENCY_WINDOW = dt.timedelta(hours=1)
DUPLICATES_WINDOW = dt.timedelta(hours=24)
LATENCY_ALERT = "latency"
LANE_LATENCY_TARGETS = {CRITICAL: 60.0, BULK: 900.0}  # p99 seconds, unless a template says
HOLD_MINUTES = 10  # the p99 must stay over the target this long before the alert fires
FIGURES_MAX_AGE_SECONDS = 30.0


def latency_targets(catalog: TemplateCatalog) -> tuple[dict[str, float], dict[str, float]]:
    """The p99 targets: per lane, and per template where its settings.toml names its own."""
    lanes = dict(LANE_LATENCY_TARGETS)
    templates = {}
    for name in catalog.names():
        own = catalog.settings(name).latency_target_seconds
        if own is not None:
            templates[name] = float(own)
    return lanes, templates


class DeliveryCollector(Collector):
    """The latency histogram and the duplicate counter, fed from the database at each scrape."""

    def __init__(
        self,
        session_factory: Callable[[], Session],
        *,
        clock: Callable[[], dt.datetime] = utcnow,
        template_names: Callable[[], list[str]] | None = None,
    ) -> None:
        self._session_factory = session_factory
        self._clock = clock
        self._template_names = template_names or (lambda: default_catalog().names())
        started = clock()
        self._latency_mark: tuple[dt.datetime, int] = (started, 0)
        self._duplicates_mark = started
        self._lock = threading.Lock()
        self.latency = Histogram(
            "console_enqueue_to_accepted_seconds",
            "Time from enqueue to the provider's acceptance, of mail accepted since this "
            "process started (every worker's: use max() over instances).",
            ["lane", "template"],
            buckets=LATENCY_BUCKETS_SECONDS,
            registry=None,
        )
        self.duplicates = Counter(
            "console_possible_duplicate_sends",
            "Sends that may have reached a person twice, since this process started "
            "(every worker's: use max() over instances).",
            ["cause"],
            registry=None,
        )
        for cause in duplicate_sends.CAUSES:
            self.duplicates.labels(cause=cause)

    def refresh(self) -> None:
        """Count what was accepted and duplicated since the last refresh."""
        with self._lock, self._session_factory() as session, session.begin():
            until = self._clock() - dt.timedelta(seconds=SETTLE_SECONDS)
            known = set(self._template_names())
            for _ in range(PAGES_PER_SCRAPE):
                rows = figures.latencies_after(session, self._latency_mark, until,
                                                       PAGE_ROWS)  # fmt: skip
                for row in rows:
                    template = row.template if row.template in known else OTHER_TEMPLATE
                    seconds = max(float(row.latency_seconds), 0.0)
                    self.latency.labels(lane=row.lane, template=template).observe(seconds)
                if rows:
                    self._latency_mark = (rows[-1].submitted_at, rows[-1].id)
                if len(rows) < PAGE_ROWS:
                    break
            if until > self._duplicates_mark:
                found = duplicate_sends.possible_duplicates(session, self._duplicates_mark, until)
                for duplicate in found:
                    self.duplicates.labels(cause=duplicate.cause).inc()
                self._duplicates_mark = until

    def collect(self) -> Iterator:
        self.refresh()
        yield from self.latency.collect()
        yield from self.duplicates.collect()


@dataclasses.dataclass(frozen=True)
class DeliveryFigures:
    latency: dict[str, figures.Percentiles]  # lane -> the last hour's p50 and p99
    targets: dict[str, float]  # lane -> its p99 target in seconds
    duplicates: dict[str, int]  # cause -> possible duplicates in the last 24 h

    @property
    def duplicates_total(self) -> int:
        return sum(self.duplicates.values())

    def over_target(self, lane: str) -> bool:
        p99 = self.latency[lane].p99_seconds
        return p99 is not None and p99 > self.targets[lane]


def read_figures(session: Session, settings: Settings, now: dt.datetime) -> DeliveryFigures:
    """The dashboard's latency and duplicate figures as of `now`."""
    lanes, _ = latency_targets(default_catalog())
    found = duplicate_sends.possible_duplicates(session, now - DUPLICATES_WINDOW, now)
    return DeliveryFigures(
        latency=figures.lane_percentiles(session, now - LATENCY_WINDOW, now),
        targets=lanes,
        duplicates=duplicate_sends.count_by_cause(found),
    )


class DashboardFigures:
    """The dashboard's figures, read at most every `max_age_seconds` whoever asks."""

    def __init__(
        self,
        max_age_seconds: float = FIGURES_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._figures: DeliveryFigures | None = None
        self._read_at = 0.0

    def get(self, session: Session, settings: Settings) -> DeliveryFigures:
        with self._lock:
            now = self._clock()
            if self._figures is None or now - self._read_at >= self.max_age_seconds:
                self._figures = read_figures(session, settings, utcnow())
                self._read_at = now
            return self._figures


def _windows_over_target(counts: dict[int, tuple[int, int]], current_minute: int) -> bool:
    """Whether the hour ending at each of the last HOLD_MINUTES minutes had its p99 over target.

    The nearest-rank p99 of n latencies is over the target exactly when more than
    n - ⌈0.99·n⌉ of them are.
    """
    for back in range(HOLD_MINUTES + 1):
        last = current_minute - back
        minutes = range(last - 59, last + 1)
        submitted = sum(counts.get(minute, (0, 0))[0] for minute in minutes)
        slow = sum(counts.get(minute, (0, 0))[1] for minute in minutes)
        if not submitted or slow <= submitted - math.ceil(0.99 * submitted):
            return False
    return True


def latency_conditions(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """``latency:<lane>`` for each lane whose last-hour p99 stayed over target (an alert check)."""
    lanes, templates = latency_targets(default_catalog())
    current_minute = math.floor(now.timestamp() / 60)
    since = dt.datetime.fromtimestamp((current_minute - HOLD_MINUTES - 59) * 60, dt.UTC)
    counts = figures.over_target_by_minute(session, since, now, lanes, templates)
    found = []
    for lane in LANES:
        by_minute = {minute: value for (row_lane, minute), value in counts.items()
                     if row_lane == lane}  # fmt: skip
        if not _windows_over_target(by_minute, current_minute):
            continue
        hour = range(current_minute - 59, current_minute + 1)
        submitted = sum(by_minute.get(minute, (0, 0))[0] for minute in hour)
        slow = sum(by_minute.get(minute, (0, 0))[1] for minute in hour)
        summary = (
            f"{lane} mail: the p99 from enqueue to acceptance has stayed over its target "
            f"({lanes[lane]:g} s) for {HOLD_MINUTES} min; {slow} of {submitted} intents "
            "accepted in the last hour were slower than their target"
        )
        details = {"lane": lane, "target_seconds": lanes[lane], "slow": slow,
                   "submitted": submitted}  # fmt: skip
        found.append(Condition(f"{LATENCY_ALERT}:{lane}", summary, details))
    return found
