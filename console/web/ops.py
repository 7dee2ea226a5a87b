"""Operations endpoints: ``/metrics`` for Prometheus and ``/healthz`` for probes.

Neither needs a login: put them behind the network's own access rules (see the
README's Monitoring section). With ``CONSOLE_METRICS_TOKEN`` set, ``/metrics``
answers 401 to a request without ``Authorization: Bearer <token>`` (what
Prometheus' ``authorization`` setting sends). Neither shows an address, a body
or a param.
``/favicon.ico`` answers the console's icon to clients that ask for it there.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from console.models import utcnow
from console.ops.metrics import prometheus
from console.ops.metrics.send_budget_figures import register_collector
from console.store import heartbeats
from console.web.extensions import current_settings, db

log = logging.getLogger(__name__)

bp = Blueprint("ops", __name__)

CACHE_EXTENSION = "console.metrics_cache"
SCHEDULER_EXTENSION = "console.scheduler"  # an object with a boolean `running`


def _queue_registry(app: Flask):
    registry = app.extensions.get(CACHE_EXTENSION)
    if registry is None:
        settings = current_settings()
        engine = db.engine
        cache = prometheus.SnapshotCache(
            lambda: Session(engine),
            cache_seconds=settings.metrics_cache_seconds,
            alive_within_seconds=settings.health_max_tick_age_seconds,
        )
        registry = prometheus.queue_registry(cache)
        register_collector(registry, lambda: Session(engine), settings)  # the send budget
        registry = app.extensions.setdefault(CACHE_EXTENSION, registry)
    return registry


@bp.get("/metrics")
def prometheus_metrics() -> Response:
    """Serve this process's instruments and the queue state in Prometheus text format."""
    expected = current_settings().metrics_token
    if expected and not prometheus.bearer_token_ok(request.headers.get("Authorization"), expected):
        refused = Response("a bearer token is required\n", status=401, content_type="text/plain")
        refused.headers.set(*prometheus.BEARER_CHALLENGE)
        return refused
    body = prometheus.exposition(_queue_registry(current_app))
    return Response(body, content_type=prometheus.CONTENT_TYPE)


def _database_check() -> tuple[bool, Any]:
    """Return whether the database answers, and the age of the newest worker tick."""
    try:
        with Session(db.engine) as session:
            last_tick_at = heartbeats.last_worker_tick_at(session)
    except SQLAlchemyError as exc:
        log.warning("health check: database unreachable", extra={"error_type": type(exc).__name__})
        return False, None
    if last_tick_at is None:
        return True, None
    return True, round(max((utcnow() - last_tick_at).total_seconds(), 0.0), 3)


def _scheduler_state(app: Flask) -> str:
    scheduler = app.extensions.get(SCHEDULER_EXTENSION)
    if scheduler is None:
        return "not in this process"
    return "running" if getattr(scheduler, "running", False) else "stopped"


@bp.get("/healthz")
def healthz() -> tuple[Response, int]:
    """Answer 200 when the database answers, the scheduler runs and a worker ticked lately."""
    max_age_seconds = current_settings().health_max_tick_age_seconds
    database_ok, tick_age_seconds = _database_check()
    scheduler = _scheduler_state(current_app)
    problems = []
    if not database_ok:
        problems.append("database unreachable")
    if scheduler == "stopped":
        problems.append("scheduler stopped")
    if database_ok and tick_age_seconds is None:
        problems.append("no worker has ticked yet")
    elif tick_age_seconds is not None and tick_age_seconds > max_age_seconds:
        problems.append(f"last worker tick {tick_age_seconds:.0f} s ago")
    report = {
        "status": "fail" if problems else "ok",
        "problems": problems,
        "database": "ok" if database_ok else "unreachable",
        "scheduler": scheduler,
        "last_tick_age_seconds": tick_age_seconds,
        "max_tick_age_seconds": max_age_seconds,
    }
    return jsonify(report), 503 if problems else 200


@bp.get("/favicon.ico")
def favicon() -> Response:
    """The console's icon, for clients that ask at /favicon.ico rather than read the page's link."""
    response = current_app.send_static_file("favicon.svg")
    response.mimetype = "image/svg+xml"
    response.cache_control.max_age = 86400
    return response
