"""The workers the dashboard lists: each worker's heartbeat and clean stop, newest tick first."""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.store.state_tables import WorkerHeartbeat

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
