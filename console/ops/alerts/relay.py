"""Which of the alerts the worker raised still hold: a check of the alert cycle."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from console.config import Settings
from console.ops.alerts.condition import Condition
from console.store import alerts
from console.worker.outcomes import RELAY_REFUSED, SMTPUTF8_MISSING


def relay_conditions(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """The worker-raised conditions that still hold (a check of the alert cycle)."""
    paused = {lane for lane, _, _ in alerts.held_back_lanes(session)}
    window_start = now - dt.timedelta(seconds=settings.alert_dead_window_seconds)
    holding = []
    for row in alerts.load_firing_alerts(session):
        kind, _, subject = row.condition.partition(":")
        still = (kind == RELAY_REFUSED and subject in paused) or (
            kind == SMTPUTF8_MISSING and row.fired_at is not None and row.fired_at > window_start
        )
        if still:
            holding.append(Condition(row.condition, row.summary or "", dict(row.details or {})))
    return holding
