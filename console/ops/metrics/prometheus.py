"""Prometheus metrics: what this process did, and what the queue holds.

Two kinds of figures:

* **process instruments** (counters and a histogram, ``console.worker.reporting``),
  incremented by the worker in this process: attempts by outcome, send latency,
  ticks. Prometheus sums them over the scraped processes.
* **queue state**, read from the database by whichever process is scraped, the
  same from every process: intents by status and lane, oldest pending age per
  lane, ambiguous and dead counts, suppressions, provider events of the last
  hour, workers alive, lane breakers. One snapshot is a handful of grouped
  queries on indexed columns, kept for ``cache_seconds`` so scrapes from several
  Prometheus servers cost one read. Only the count of every status (submitted
  grows without end) has to pass over the whole table: it is redone at most
  once a minute, while the live statuses (pending, sending, ambiguous, dead)
  are counted through index ranges at every refresh.

No Flask here: the worker records into this module, ``console.web.ops`` serves it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hmac
import logging
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from console.config import Settings
from console.models import utcnow
from console.ops.metrics import hold_figures
from console.ops.metrics.delivery_figures import DeliveryCollector
from console.store import heartbeats, queue_figures
from console.store.queue_figures import Counts, count_every_status
from console.vocabulary import AMBIGUOUS, DEAD, LANES, PENDING, SENDING
from console.worker.reporting import PROCESS_REGISTRY

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RECENT_EVENTS_SECONDS = 3600.0
SNAPSHOT_STATEMENT_TIMEOUT_MS = 5000
TOTALS_MIN_SECONDS = 60.0
# Statuses an operator watches minute by minute, counted at every refresh.
LIVE_STATUSES = (PENDING, SENDING, AMBIGUOUS, DEAD)
BEARER_CHALLENGE = ("WWW-Authenticate", 'Bearer realm="metrics"')


@dataclasses.dataclass(frozen=True)
class QueueSnapshot:
    """The queue's state at one moment, as read by read_snapshot()."""

    taken_at: dt.datetime
    intents: dict[tuple[str, str], int]  # (status, lane) -> count
    oldest_pending_created_at: dict[str, dt.datetime | None]  # lane -> created_at
    suppressions: dict[str, int]  # reason -> count
    recent_events: dict[str, int]  # event type -> count in the last hour
    last_tick_at: dt.datetime | None
    workers_alive: int
    breakers: dict[str, tuple[str, float | None]]  # lane -> (state, failure rate)

    def count(self, status: str, lane: str | None = None) -> int:
        """Return how many intents have `status` (in `lane`, or in any lane)."""
        return sum(n for (s, ln), n in self.intents.items() if s == status and lane in (None, ln))

    def oldest_pending_age_seconds(self, lane: str) -> float:
        """Return the age of the oldest pending intent in `lane`, 0 when there is none."""
        oldest = self.oldest_pending_created_at.get(lane)
        return max((self.taken_at - oldest).total_seconds(), 0.0) if oldest else 0.0

    def last_tick_age_seconds(self) -> float | None:
        if self.last_tick_at is None:
            return None
        return max((self.taken_at - self.last_tick_at).total_seconds(), 0.0)


def read_snapshot(
    session: Session,
    now: dt.datetime,
    alive_within_seconds: float,
    totals: Counts | None = None,
) -> QueueSnapshot:
    """Read the queue's state with grouped queries on indexed columns.

    `totals` (an earlier count_every_status) spares the full count: only the
    live statuses are counted again. None counts every status now.
    """
    queue_figures.limit_statement_time(session, SNAPSHOT_STATEMENT_TIMEOUT_MS)
    if totals is None:
        intents = count_every_status(session)
    else:
        settled = {key: n for key, n in totals.items() if key[0] not in LIVE_STATUSES}
        intents = settled | queue_figures.count_statuses(session, LIVE_STATUSES)
    alive_since = now - dt.timedelta(seconds=alive_within_seconds)
    return QueueSnapshot(
        taken_at=now,
        intents=intents,
        oldest_pending_created_at=queue_figures.oldest_pending_by_lane(session),
        suppressions=queue_figures.count_suppressions_by_reason(session),
        recent_events=queue_figures.count_provider_events_since(
            session, now - dt.timedelta(seconds=RECENT_EVENTS_SECONDS)
        ),
        last_tick_at=heartbeats.last_worker_tick_at(session),
        workers_alive=heartbeats.count_workers_ticked_since(session, alive_since),
        breakers=queue_figures.lane_breaker_states(session),
    )


class SnapshotCache:
    """Read a snapshot at most once every `cache_seconds`, whoever asks.

    The count of every status (a pass over the whole table) is redone at most
    every TOTALS_MIN_SECONDS (or every time when `cache_seconds` is 0); the live
    statuses, ages, breakers and ticks at every refresh.
    """

    def __init__(
        self,
        session_factory: Callable[[], Session],
        *,
        cache_seconds: float,
        alive_within_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session_factory = session_factory
        self._cache_seconds = cache_seconds
        self._totals_seconds = max(cache_seconds, TOTALS_MIN_SECONDS) if cache_seconds else 0.0
        self._alive_within_seconds = alive_within_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot: QueueSnapshot | None = None
        self._read_at = self._totals_read_at = 0.0
        self._totals: Counts | None = None

    def get(self) -> QueueSnapshot:
        """Return a snapshot no older than `cache_seconds`."""
        with self._lock:
            now = self._clock()
            if self._snapshot is None or now - self._read_at >= self._cache_seconds:
                totals_fresh = self._totals is not None and (
                    now - self._totals_read_at < self._totals_seconds
                )
                totals = self._totals if totals_fresh else None
                with self._session_factory() as session, session.begin():
                    self._snapshot = read_snapshot(
                        session, utcnow(), self._alive_within_seconds, totals
                    )
                self._read_at = now
                if not totals_fresh:
                    self._totals, self._totals_read_at = self._snapshot.intents, now
            return self._snapshot


class QueueCollector(Collector):
    """Expose a SnapshotCache as Prometheus gauges."""

    def __init__(self, cache: SnapshotCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot = self._cache.get()
        yield from _intent_families(snapshot)
        yield from _other_families(snapshot)


def _intent_families(snapshot: QueueSnapshot) -> Iterator[GaugeMetricFamily]:
    intents = GaugeMetricFamily(
        "console_intents", "Email intents by status and lane.", labels=["status", "lane"]
    )
    for (status, lane), count in sorted(snapshot.intents.items()):
        intents.add_metric([status, lane], count)
    yield intents
    oldest = GaugeMetricFamily(
        "console_oldest_pending_age_seconds",
        "Age of the oldest pending intent per lane (0 when none is pending).",
        labels=["lane"],
    )
    for lane in LANES:
        oldest.add_metric([lane], snapshot.oldest_pending_age_seconds(lane))
    yield oldest
    yield GaugeMetricFamily(
        "console_ambiguous_intents",
        "Intents whose send outcome is unknown, waiting for reconciliation.",
        value=snapshot.count(AMBIGUOUS),
    )
    yield GaugeMetricFamily(
        "console_dead_intents", "Intents dead-lettered.", value=snapshot.count(DEAD)
    )


def _other_families(snapshot: QueueSnapshot) -> Iterator[GaugeMetricFamily]:
    suppressions = GaugeMetricFamily(
        "console_suppressions", "Suppressed addresses by reason.", labels=["reason"]
    )
    for reason, count in sorted(snapshot.suppressions.items()):
        suppressions.add_metric([reason], count)
    yield suppressions
    events = GaugeMetricFamily(
        "console_provider_events_last_hour",
        "Provider events received in the last hour, by type.",
        labels=["type"],
    )
    for event_type, count in sorted(snapshot.recent_events.items()):
        events.add_metric([event_type], count)
    yield events
    yield GaugeMetricFamily(
        "console_workers_alive", "Workers that ticked recently.", value=snapshot.workers_alive
    )
    tick_age = snapshot.last_tick_age_seconds()
    if tick_age is not None:
        yield GaugeMetricFamily(
            "console_last_tick_age_seconds",
            "Seconds since the most recent tick of any worker.",
            value=tick_age,
        )
    paused = GaugeMetricFamily(
        "console_lane_paused",
        "1 when the lane's circuit breaker holds sends back (open or probing).",
        labels=["lane"],
    )
    rate = GaugeMetricFamily(
        "console_lane_failure_rate",
        "Failure rate that last moved the lane's circuit breaker.",
        labels=["lane"],
    )
    for lane in LANES:
        state, failure_rate = snapshot.breakers.get(lane, ("closed", None))
        paused.add_metric([lane], 0 if state == "closed" else 1)
        rate.add_metric([lane], failure_rate or 0.0)
    yield paused
    yield rate


def queue_registry(cache: SnapshotCache) -> CollectorRegistry:
    """Return a registry holding the queue gauges read through `cache`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(cache))
    registry.register(DeliveryCollector(cache._session_factory))  # enqueue->accepted, duplicates
    return hold_figures.register_collector(registry, cache._session_factory)  # held intents


def exposition(queue: CollectorRegistry) -> bytes:
    """Return this process's instruments and the queue gauges in Prometheus text format.

    When the database cannot be read the process instruments are still served,
    with ``console_database_up 0`` in place of the queue gauges.
    """
    try:
        queue_text, database_up = generate_latest(queue), 1
    except SQLAlchemyError as exc:
        log.warning("queue metrics unavailable", extra={"error_type": type(exc).__name__})
        queue_text, database_up = b"", 0
    up = CollectorRegistry()
    Gauge("console_database_up", "1 when the queue could be read.", registry=up).set(database_up)
    return generate_latest(PROCESS_REGISTRY) + generate_latest(up) + queue_text


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        return None


def bearer_token_ok(authorization: str | None, expected: str) -> bool:
    """Whether an Authorization header carries `expected` as its bearer token."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), expected.encode())


def start_metrics_server(settings: Settings, session_factory: Callable[[], Session]):
    """Serve GET /metrics (this process and the queue) on the worker's own port, in a thread.

    Return the server (call ``shutdown()`` to stop it), or None when no port is set.
    """
    if settings.worker_metrics_port is None:
        return None
    cache = SnapshotCache(
        session_factory,
        cache_seconds=settings.metrics_cache_seconds,
        alive_within_seconds=settings.health_max_tick_age_seconds,
    )
    registry = queue_registry(cache)

    def application(environ, start_response):
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics here\n"]
        expected = settings.metrics_token
        if expected and not bearer_token_ok(environ.get("HTTP_AUTHORIZATION"), expected):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"), BEARER_CHALLENGE])
            return [b"a bearer token is required\n"]
        body = exposition(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [body]

    server = make_server(
        settings.worker_metrics_host,
        settings.worker_metrics_port,
        application,
        server_class=ThreadingWSGIServer,
        handler_class=_QuietHandler,
    )
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
