"""Retention: scrub what finished mail no longer needs, keep its trace.

Terminal intents created before the cutoff lose their params (``params`` NULL,
``params_scrubbed_at`` set) and their attempts lose the reply texts; provider
events received before the cutoff lose their raw payload. Ids, statuses,
codes, Message-IDs, provider ids and timestamps stay, so the timeline of an
old intent still reads end to end.

Work goes in batches (``batch_size`` rows, one short transaction each), found
through partial indexes that hold only rows still to do, so a pass never holds
a lock for long and a daily run costs what the day added.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.models import utcnow
from console.store import retention_sweeps

log = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0


@dataclasses.dataclass
class PruneReport:
    """What one retention pass changed."""

    intents_scrubbed: int = 0
    attempts_trimmed: int = 0
    events_trimmed: int = 0
    batches: int = 0


def prune(
    session_factory: Callable[[], Session],
    *,
    retention_days: float,
    batch_size: int = 1000,
    pause_seconds: float = 0.0,
    now: dt.datetime | None = None,
) -> PruneReport:
    """Run one retention pass to the end, one short transaction per batch."""
    now = now or utcnow()
    cutoff = now - dt.timedelta(seconds=retention_days * SECONDS_PER_DAY)
    report = PruneReport()
    while True:
        intents, attempts = retention_sweeps.scrub_finished_intents_batch(
            session_factory, cutoff, batch_size, now
        )
        report.intents_scrubbed += intents
        report.attempts_trimmed += attempts
        report.batches += 1
        if intents < batch_size:
            break
        time.sleep(pause_seconds)
    while True:
        events = retention_sweeps.trim_event_payloads_batch(session_factory, cutoff, batch_size)
        report.events_trimmed += events
        report.batches += 1
        if events < batch_size:
            break
        time.sleep(pause_seconds)
    log.info(
        "retention pass finished",
        extra={"count": report.intents_scrubbed, "batch_size": batch_size, "stage": "retention"},
    )
    return report
