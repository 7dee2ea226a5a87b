"""The worker_heartbeat row of each worker: written every tick."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from console.store.sql import dialect_of, insert_for
from console.store.state_tables import WorkerHeartbeat


def beat(
    session: Session,
    *,
    worker_id: str,
    host: str,
    pid: int,
    started_at: dt.datetime,
    now: dt.datetime,
) -> None:
    """Insert or refresh this worker's heartbeat row (the caller commits)."""
    statement = insert_for(dialect_of(session))(WorkerHeartbeat).values(
        worker_id=worker_id, host=host, pid=pid, started_at=started_at, last_tick_at=now
    )
    statement = statement.on_conflict_do_update(
        index_elements=["worker_id"], set_={"last_tick_at": statement.excluded.last_tick_at}
    )
    session.execute(statement)
