"""Retention: scrub what finished mail no longer needs, then forget it after a horizon.

After ``retention_days`` (``CONSOLE_RETENTION_DAYS``):

- terminal intents lose their params (``params`` NULL, ``params_scrubbed_at``
  set) and their attempts the reply texts; provider events lose their raw payload;
- suppressions lose their free-text note (the entry stays: it keeps mail from
  going out);
- audit entries name the address they acted on by its keyed hash
  (``addr:<12 hex>``), keeping who, what and when.

After ``delete_days`` (``CONSOLE_RETENTION_DELETE_DAYS``; 0 turns it off) terminal
intents are deleted with their attempts and matched provider events, and
provider events that never matched an intent are deleted too.

Every pass also deletes the used webhook request keys whose window is over.

Work goes in batches (``batch_size`` rows, one short transaction each), so a
pass never holds a lock for long and a daily run costs what the day added.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.models import utcnow
from console.store import retention
from console.store import webhook_replay_keys as events

log = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0


@dataclasses.dataclass
class PruneReport:
    """What one retention pass changed."""

    intents_scrubbed: int = 0
    attempts_trimmed: int = 0
    events_trimmed: int = 0
    intents_deleted: int = 0
    events_deleted: int = 0
    suppression_notes_cleared: int = 0
    audit_targets_hashed: int = 0
    replay_keys_deleted: int = 0
    batches: int = 0  # transactions that found rows to change


def _days_before(now: dt.datetime, days: float) -> dt.datetime:
    return now - dt.timedelta(seconds=days * SECONDS_PER_DAY)


def prune(
    session_factory: Callable[[], Session],
    *,
    retention_days: float,
    batch_size: int = 1000,
    pause_seconds: float = 0.0,
    now: dt.datetime | None = None,
    delete_days: float = 0.0,
    address_key: str = "",
) -> PruneReport:
    """Run one retention pass to the end, one short transaction per batch.

    `address_key` is the secret key the audit log's addresses are hashed with;
    without one they are left as they are.
    """
    now = now or utcnow()
    cutoff = _days_before(now, retention_days)
    report = PruneReport()

    def in_batches(step: Callable[[], int]) -> None:
        while True:
            looked_at = step()
            report.batches += looked_at > 0
            if looked_at < batch_size:
                return
            time.sleep(pause_seconds)

    if delete_days > 0:
        horizon = _days_before(now, delete_days)
        in_batches(lambda: _delete_intents(session_factory, horizon, batch_size, report))
        in_batches(lambda: _delete_events(session_factory, horizon, batch_size, report))
    in_batches(lambda: _scrub_intents(session_factory, cutoff, batch_size, now, report))
    in_batches(lambda: _trim_events(session_factory, cutoff, batch_size, report))
    in_batches(lambda: _clear_notes(session_factory, cutoff, batch_size, report))
    in_batches(lambda: _forget_replay_keys(session_factory, now, batch_size, report))
    if address_key:
        in_batches(lambda: _hash_audit(session_factory, cutoff, batch_size, address_key, report))
    log.info(
        "retention pass finished",
        extra={"count": report.intents_scrubbed + report.intents_deleted,
               "batch_size": batch_size, "stage": "retention"},
    )  # fmt: skip
    return report


def _delete_intents(factory, horizon, batch_size, report: PruneReport) -> int:
    looked_at, deleted = retention.delete_finished_intents_batch(factory, horizon, batch_size)
    report.intents_deleted += deleted
    return looked_at


def _delete_events(factory, horizon, batch_size, report: PruneReport) -> int:
    deleted = retention.delete_unmatched_events_batch(factory, horizon, batch_size)
    report.events_deleted += deleted
    return deleted


def _scrub_intents(factory, cutoff, batch_size, now, report: PruneReport) -> int:
    intents, attempts = retention.scrub_finished_intents_batch(factory, cutoff, batch_size, now)
    report.intents_scrubbed += intents
    report.attempts_trimmed += attempts
    return intents


def _trim_events(factory, cutoff, batch_size, report: PruneReport) -> int:
    events = retention.trim_event_payloads_batch(factory, cutoff, batch_size)
    report.events_trimmed += events
    return events


def _clear_notes(factory, cutoff, batch_size, report: PruneReport) -> int:
    cleared = retention.clear_suppression_notes_batch(factory, cutoff, batch_size)
    report.suppression_notes_cleared += cleared
    return cleared


def _hash_audit(factory, cutoff, batch_size, key, report: PruneReport) -> int:
    hashed = retention.hash_old_audit_targets_batch(factory, cutoff, batch_size, key)
    report.audit_targets_hashed += hashed
    return hashed


def _forget_replay_keys(factory, now, batch_size, report: PruneReport) -> int:
    deleted = events.delete_expired_replay_keys(factory, now, batch_size)
    report.replay_keys_deleted += deleted
    return deleted
