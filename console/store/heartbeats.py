"""The worker_heartbeat row of each worker: written every tick, with the version it runs, and once
more when the worker stops cleanly.

What is read back: the most recent tick of any worker (the dashboard, /metrics and /healthz), how
many workers ticked lately, and the workers the dashboard lists, newest tick first.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from importlib import metadata
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from console.state_tables import WorkerHeartbeat
from console.store.sql_helpers import insert_on_conflict

BEAT = insert_on_conflict(  # a worker that ticks runs: no longer stopped
    WorkerHeartbeat.__table__,
    ["worker_id", "host", "pid", "started_at", "last_tick_at", "version"],
    "worker_id",
    then="UPDATE SET last_tick_at = excluded.last_tick_at, version = excluded.version, "
    "stopped_at = NULL",
)

DISTRIBUTION = "outbox-console"
VERSION_LONGEST = 64


@functools.cache
def product_version() -> str:
    """The installed product's version, e.g. "0.1.0"; "unknown" when it is not installed."""
    try:
        return metadata.version(DISTRIBUTION)[:VERSION_LONGEST]
    except metadata.PackageNotFoundError:
        return "unknown"


def beat(
    session: Session,
    *,
    worker_id: str,
    host: str,
    pid: int,
    started_at: dt.datetime,
    now: dt.datetime,
    version: str | None = None,
) -> None:
    """Insert or refresh this worker's heartbeat row (the caller commits).

    `version` defaults to this process's product version; a worker upgraded in
    place writes its new version with its next tick.
    """
    values = beat_values(worker_id, host=host, pid=pid, started_at=started_at, now=now)
    if version:
        values["version"] = version[:VERSION_LONGEST]
    session.execute(BEAT, values)


def beat_values(
    worker_id: str, *, host: str, pid: int, started_at: dt.datetime, now: dt.datetime
) -> dict[str, Any]:
    """The heartbeat row of a worker that ticks at `now`, with this process's version."""
    return dict(
        worker_id=worker_id,
        host=host,
        pid=pid,
        started_at=started_at,
        last_tick_at=now,
        version=product_version()[:VERSION_LONGEST],
    )


def record_stop(session: Session, *, worker_id: str, now: dt.datetime) -> None:
    """Mark this worker's heartbeat as stopped cleanly at `now` (the caller commits)."""
    statement = update(WorkerHeartbeat).where(WorkerHeartbeat.worker_id == worker_id)
    session.execute(statement.values(stopped_at=now))


def last_worker_tick_at(session: Session) -> dt.datetime | None:
    """Return the most recent tick of any worker, None before the first."""
    return session.execute(select(func.max(WorkerHeartbeat.last_tick_at))).scalar_one()


def count_workers_ticked_since(session: Session, since: dt.datetime) -> int:
    """Count the workers whose last tick is at or after `since`."""
    query = select(func.count()).where(WorkerHeartbeat.last_tick_at >= since)
    return session.execute(query).scalar_one()


MOST_WORKERS_SHOWN = 20


@dataclasses.dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str | None
    pid: int | None
    started_at: dt.datetime
    last_tick_at: dt.datetime
    version: str | None  # None: a worker from before versions were recorded
    stopped_at: dt.datetime | None = None  # None: running, or gone without a clean stop


def recent_workers(session: Session, *, limit: int = MOST_WORKERS_SHOWN) -> list[WorkerRow]:
    """Return the workers with the most recent ticks, newest first."""
    columns = [getattr(WorkerHeartbeat, field.name) for field in dataclasses.fields(WorkerRow)]
    query = select(*columns).order_by(WorkerHeartbeat.last_tick_at.desc()).limit(limit)
    return [WorkerRow(*row) for row in session.execute(query)]
