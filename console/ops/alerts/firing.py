"""Fire a condition: the compare-and-set that marks it, and the notice of the one that wins.

The notice is an email through the product's own outbox (enqueued in the same
transaction as the transition, when ``CONSOLE_ALERT_EMAIL`` is set) and a log line;
the webhook is posted after commit (``console.ops.alerts.webhook``).
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.orm import Session

from console.config import Settings
from console.ops.alerts.condition import Condition
from console.outbox import enqueue
from console.store import alerts
from console.vocabulary import CRITICAL

log = logging.getLogger(__name__)

ALERT_TEMPLATE = "ops-alert"


def _enqueue_alert_email(session: Session, settings: Settings, condition: Condition, now):
    enqueue(
        session,
        key=f"{ALERT_TEMPLATE}:{condition.key}:{now.isoformat()}",
        to=settings.alert_email,
        template=ALERT_TEMPLATE,
        params={
            "condition": condition.key,
            "summary": condition.summary,
            "details": condition.details,
            "fired_at": now.isoformat(timespec="seconds"),
        },
        lane=CRITICAL,
        event=f"alert:{condition.key}",
    )


def fire(session: Session, settings: Settings, condition: Condition, now: dt.datetime) -> bool:
    """Mark `condition` firing unless it is; the call that does it notifies (email, log)."""
    key, summary, details = condition.key, condition.summary, condition.details
    if not alerts.mark_alert_firing(session, key, summary, details, now):
        return False
    if settings.alert_email:
        _enqueue_alert_email(session, settings, condition, now)
    log.error(condition.summary, extra={"condition": condition.key, "stage": "alert"})
    return True
