"""Alerts: spot conditions an operator must act on, tell the targets once per condition.

Every ``CHECKS`` entry returns the conditions that hold now: the queue's own
(``checks``), the worker's relay alerts (``relay``), the events endpoints'
(``endpoints``), the delivery latency, the send quota and holds kept a day
(``console.ops.metrics``), and a provider's lookups that keep failing (``lookups``).

Each condition has one row in ``alert_state``. Firing and clearing are
compare-and-set updates, so when several processes evaluate at once exactly one
of them wins the transition and notifies: an email through the product's own
outbox (enqueued in the same transaction as the transition) and/or a JSON POST
to a webhook (claimed, sent after commit, retried by a later cycle on failure).
Nothing fires again until the condition has cleared.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.config import Settings
from console.mail.catalog import TemplateCatalog, default_catalog
from console.models import utcnow
from console.ops.alerts.checks import (
    ambiguous_waiting,
    breakers_open,
    dead_letters,
    pending_too_long,
    provider_auth_failures,
    sender_rates_over_limit,
)
from console.ops.alerts.condition import Check, Condition
from console.ops.alerts.endpoints import endpoint_conditions
from console.ops.alerts.firing import fire
from console.ops.alerts.lookups import lookup_conditions
from console.ops.alerts.relay import relay_conditions
from console.ops.alerts.webhook import Poster, deliver_webhooks, http_post
from console.ops.metrics.delivery_figures import latency_conditions
from console.ops.metrics.hold_figures import hold_reminders
from console.ops.metrics.send_budget_figures import quota_conditions
from console.store import alerts

log = logging.getLogger(__name__)


@dataclasses.dataclass
class CycleReport:
    fired: list[str] = dataclasses.field(default_factory=list)
    cleared: list[str] = dataclasses.field(default_factory=list)
    webhooks_sent: int = 0
    webhooks_failed: int = 0


CHECKS: tuple[Check, ...] = (
    dead_letters,
    ambiguous_waiting,
    breakers_open,
    provider_auth_failures,
    sender_rates_over_limit,
    latency_conditions,  # p99 enqueue -> accepted over its target for 10 min
    relay_conditions,  # raised by the worker, naming the relay's reply
    endpoint_conditions,  # an SES topic unsubscribed, inbound mail at the events endpoint
    quota_conditions,  # the daily send quota stops bulk claiming
    hold_reminders,  # a hold set for a day or more, once a day
    lookup_conditions,  # raised by the reconcile job while the provider's lookups fail
)


def active_conditions(
    session: Session,
    settings: Settings,
    now: dt.datetime,
    catalog: TemplateCatalog | None = None,
) -> list[Condition]:
    """Return every alert condition that holds at `now`."""
    found = [condition for check in CHECKS for condition in check(session, settings, now)]
    return found + pending_too_long(session, settings, now, catalog or default_catalog())


def update_states(
    session: Session, settings: Settings, conditions: list[Condition], now: dt.datetime
) -> tuple[list[str], list[str]]:
    """Fire new conditions and clear those that no longer hold; return (fired, cleared)."""
    holding = {c.key for c in conditions}
    active = alerts.load_active_alert_keys(session)
    fired = []
    for condition in conditions:
        if condition.key not in active and fire(session, settings, condition, now):
            fired.append(condition.key)
    gone = sorted(active - holding)
    cleared = [key for key in gone if alerts.mark_alert_cleared(session, key, now)]
    for key in cleared:
        log.info("alert condition cleared", extra={"condition": key, "stage": "alert"})
    return fired, cleared


def run_alert_cycle(
    session_factory: Callable[[], Session],
    settings: Settings,
    *,
    now: dt.datetime | None = None,
    catalog: TemplateCatalog | None = None,
    post: Poster = http_post,
) -> CycleReport:
    """Evaluate every condition, record transitions, and notify the configured targets."""
    now = now or utcnow()
    with session_factory() as session, session.begin():
        conditions = active_conditions(session, settings, now, catalog)
        fired, cleared = update_states(session, settings, conditions, now)
    report = CycleReport(fired=fired, cleared=cleared)
    if settings.alert_webhook_url:
        report.webhooks_sent, report.webhooks_failed = deliver_webhooks(
            session_factory, settings, now, post
        )
    return report
