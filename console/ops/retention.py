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

from sqlalchemy import null, select, update
from sqlalchemy.orm import Session

from console.models import Attempt, Intent, ProviderEvent, utcnow
from console.vocabulary import TERMINAL_STATUSES

log = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0


@dataclasses.dataclass
class PruneReport:
    """What one retention pass changed."""

    intents_scrubbed: int = 0
    attempts_trimmed: int = 0
    events_trimmed: int = 0
    batches: int = 0


def _lock_rows(statement, session: Session):
    if session.get_bind().dialect.name == "postgresql":
        return statement.with_for_update(skip_locked=True)
    return statement


def scrub_intent_batch(
    session: Session, cutoff: dt.datetime, batch_size: int, now: dt.datetime
) -> tuple[int, int]:
    """Scrub up to `batch_size` finished intents created before `cutoff`.

    Return how many intents were looked at and how many attempt replies trimmed.

    The UPDATE repeats the terminal-status condition, so an intent an operator
    requeued in the meantime keeps its params.
    """
    candidates = _lock_rows(
        select(Intent.id)
        .where(
            Intent.params_scrubbed_at.is_(None),
            Intent.created_at < cutoff,
            Intent.status.in_(TERMINAL_STATUSES),
        )
        .order_by(Intent.created_at)
        .limit(batch_size),
        session,
    )
    ids = session.execute(candidates).scalars().all()
    if not ids:
        return 0, 0
    scrubbed = (
        session.execute(
            update(Intent)
            .where(Intent.id.in_(ids), Intent.status.in_(TERMINAL_STATUSES))
            .values(params=null(), params_scrubbed_at=now)
            .returning(Intent.id)
        )
        .scalars()
        .all()
    )
    trimmed = session.execute(
        update(Attempt)
        .where(Attempt.intent_id.in_(scrubbed), Attempt.reply_text.is_not(None))
        .values(reply_text=null())
    ).rowcount
    return len(ids), trimmed


def trim_event_batch(session: Session, cutoff: dt.datetime, batch_size: int) -> int:
    """Drop the raw payload of up to `batch_size` provider events received before `cutoff`."""
    candidates = _lock_rows(
        select(ProviderEvent.id)
        .where(ProviderEvent.payload.is_not(None), ProviderEvent.received_at < cutoff)
        .order_by(ProviderEvent.received_at)
        .limit(batch_size),
        session,
    )
    ids = session.execute(candidates).scalars().all()
    if not ids:
        return 0
    session.execute(update(ProviderEvent).where(ProviderEvent.id.in_(ids)).values(payload=null()))
    return len(ids)


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
        with session_factory() as session, session.begin():
            intents, attempts = scrub_intent_batch(session, cutoff, batch_size, now)
        report.intents_scrubbed += intents
        report.attempts_trimmed += attempts
        report.batches += 1
        if intents < batch_size:
            break
        time.sleep(pause_seconds)
    while True:
        with session_factory() as session, session.begin():
            events = trim_event_batch(session, cutoff, batch_size)
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
