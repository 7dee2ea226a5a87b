"""The drills' recorded summaries: write one, read the last, read one by id. No commit here."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from console.state_tables import DrillRun

SHOWN_LONGEST = 255


def add_run(
    session: Session,
    *,
    ran_at: dt.datetime,
    version: str,
    configuration: str,
    database: str,
    results: list[dict[str, Any]],
) -> DrillRun:
    """Keep one run's summary; return it (flushed, with its id)."""
    run = DrillRun(
        ran_at=ran_at,
        version=version[:64],
        configuration=configuration[:64],
        database=database[:SHOWN_LONGEST],
        held=sum(1 for result in results if result.get("passed")),
        total=sum(1 for result in results if result.get("verdict") != "n/a"),
        results=results,
    )
    session.add(run)
    session.flush()
    return run


def last_run(session: Session) -> DrillRun | None:
    """The newest recorded run, or None when the drills were never recorded."""
    query = select(DrillRun).order_by(DrillRun.ran_at.desc(), DrillRun.id.desc()).limit(1)
    return session.scalar(query)


def run_by_id(session: Session, run_id: int) -> DrillRun | None:
    return session.get(DrillRun, run_id)
