"""The worker_heartbeat row of each worker: written every tick, with the version it runs,
and once more when the worker stops cleanly."""

from __future__ import annotations

import datetime as dt
import functools
from importlib import metadata

from sqlalchemy import update
from sqlalchemy.orm import Session

from console.store.sql import dialect_of, insert_for
from console.store.state_tables import WorkerHeartbeat

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
    version = (version or product_version())[:VERSION_LONGEST]
    statement = insert_for(dialect_of(session))(WorkerHeartbeat).values(
        worker_id=worker_id,
        host=host,
        pid=pid,
        started_at=started_at,
        last_tick_at=now,
        version=version,
    )
    excluded = statement.excluded
    statement = statement.on_conflict_do_update(
        index_elements=["worker_id"],
        set_={
            "last_tick_at": excluded.last_tick_at,
            "version": excluded.version,
            "stopped_at": None,  # it ticks: it runs
        },
    )
    session.execute(statement)


def record_stop(session: Session, *, worker_id: str, now: dt.datetime) -> None:
    """Mark this worker's heartbeat as stopped cleanly at `now` (the caller commits)."""
    statement = update(WorkerHeartbeat).where(WorkerHeartbeat.worker_id == worker_id)
    session.execute(statement.values(stopped_at=now))
