"""The process instruments: what the workers of this process did, counted as they do it.

Attempts by outcome, send latency by lane, loop iterations, domain deferrals and
SMTP reconnects, in ``PROCESS_REGISTRY``; Prometheus sums them over the scraped
processes (``console.ops.metrics.prometheus`` serves them with the queue's state). The send
loop imports this module alone: no database queries, no web server.
"""

from __future__ import annotations

import functools

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.process_collector import ProcessCollector

LATENCY_BUCKETS_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

PROCESS_REGISTRY = CollectorRegistry()
ProcessCollector(registry=PROCESS_REGISTRY)
ATTEMPTS = Counter(
    "console_attempts",
    "Attempts finished by workers of this process, by classified outcome.",
    ["outcome"],
    registry=PROCESS_REGISTRY,
)
SEND_LATENCY = Histogram(
    "console_send_latency_seconds",
    "Time from the start of an attempt to the transport's answer, in this process.",
    ["lane"],
    buckets=LATENCY_BUCKETS_SECONDS,
    registry=PROCESS_REGISTRY,
)
TICKS = Counter(
    "console_worker_ticks",
    "Worker loop iterations (claim, send, record) in this process.",
    registry=PROCESS_REGISTRY,
)
DOMAIN_DEFERRALS = Counter(
    "console_domain_deferrals",
    "Times a run of 4yz replies deferred every due intent of a recipient domain.",
    registry=PROCESS_REGISTRY,
)
SMTP_RECONNECTS = Counter(
    "console_smtp_reconnects",
    "SMTP connections opened to replace one that broke (hang-up, timeout, 421).",
    registry=PROCESS_REGISTRY,
)


def record_attempt(outcome: str, lane: str, duration_seconds: float) -> None:
    """Count one finished attempt and its send latency."""
    _attempts_with(outcome).inc()
    _latency_in(lane).observe(max(duration_seconds, 0.0))


def record_tick() -> None:
    """Count one iteration of a worker loop."""
    TICKS.inc()


# Each label's child, looked up once: ``labels()`` checks and converts its values and
# takes the metric's lock on every call, twice a message on the send path (the
# children live as long as their metric; none is ever removed).
@functools.cache
def _attempts_with(outcome: str) -> Counter:
    return ATTEMPTS.labels(outcome=outcome)


@functools.cache
def _latency_in(lane: str) -> Histogram:
    return SEND_LATENCY.labels(lane=lane)
