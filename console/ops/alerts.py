"""Alerts: spot conditions an operator must act on, tell the targets once per condition.

Conditions (each read with a small query on indexed columns):

* ``dead_letter`` — an intent was dead-lettered within the last window;
* ``ambiguous_waiting`` — an intent has waited in ``ambiguous`` longer than allowed;
* ``pending_age:<template>`` — the oldest pending intent of a template is older than
  its target (``pending_age_target_seconds`` in the template's settings.toml, else
  the lane's default);
* ``breaker_open:<lane>`` — the lane's circuit breaker holds sends back;
* ``provider_auth`` — the provider answered 401/403 (HTTP) or 530/535 (SMTP);
* ``provider_lookup_failing:<provider>`` — the provider's lookup API keeps failing
  (``console.ops.lookup_alerts``).

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
import functools
import logging
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session

from console.config import Settings
from console.core.plurals import plural
from console.core.readable import format_age, format_basis_points, format_percent, format_window
from console.mail.catalog import TemplateCatalog, default_catalog
from console.models import utcnow
from console.ops.delivery_figures import latency_conditions
from console.ops.event_alerts import endpoint_conditions
from console.ops.hold_figures import hold_reminders
from console.ops.lookup_alerts import lookup_conditions
from console.ops.relay_conditions import relay_conditions
from console.ops.send_budget_figures import quota_conditions
from console.outbox import enqueue
from console.state_tables import AlertState
from console.store import alerts, send_budget
from console.store.alerts import RESOLVED
from console.store.send_budget import SenderRate, sender_rates
from console.vocabulary import CRITICAL

log = logging.getLogger(__name__)

DEAD_LETTER = "dead_letter"
AMBIGUOUS_WAITING = "ambiguous_waiting"
PENDING_AGE = "pending_age"
BREAKER_OPEN = "breaker_open"
PROVIDER_AUTH = "provider_auth"
SENDER_RATE = "sender_rate"
AUTH_FAILURE_CODES = (401, 403, 530, 535)
ALERT_TEMPLATE = "ops-alert"
WEBHOOK_RETRY_SECONDS = 60.0
RATE_NOUNS = {send_budget.BOUNCE: "permanent bounce", send_budget.COMPLAINT: "complaint"}


@dataclasses.dataclass(frozen=True)
class Condition:
    """A condition that holds now: its key, one line for humans, and opaque details."""

    key: str
    summary: str
    details: dict[str, Any]


@dataclasses.dataclass
class CycleReport:
    fired: list[str] = dataclasses.field(default_factory=list)
    cleared: list[str] = dataclasses.field(default_factory=list)
    webhooks_sent: int = 0
    webhooks_failed: int = 0


def _ago(now: dt.datetime, seconds: float) -> dt.datetime:
    return now - dt.timedelta(seconds=seconds)


def dead_letters(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    since = _ago(now, settings.alert_dead_window_seconds)
    count, newest = alerts.count_dead_since(session, since)
    if not count:
        return []
    window = format_window(settings.alert_dead_window_seconds)
    summary = f"{plural(count, 'intent')} dead-lettered in {window}"
    return [Condition(DEAD_LETTER, summary, {"count": count, "newest_intent_id": newest})]


def ambiguous_waiting(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    threshold = settings.alert_ambiguous_after_seconds
    count, oldest = alerts.count_ambiguous_before(session, _ago(now, threshold))
    if not count:
        return []
    waited = (now - oldest).total_seconds()
    summary = f"{plural(count, 'ambiguous intent')} waiting longer than {format_age(threshold)}"
    return [
        Condition(AMBIGUOUS_WAITING, summary, {"count": count, "oldest_wait_seconds": int(waited)})
    ]


@functools.cache
def _pending_age_target(root: str, template: str) -> float | None:
    try:
        raw = tomllib.loads((Path(root) / template / "settings.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    value = raw.get("pending_age_target_seconds")
    return float(value) if isinstance(value, int | float) else None


def pending_age_target(
    catalog: TemplateCatalog, settings: Settings, template: str, lane: str
) -> float:
    """Return the pending-age target of `template`: its own, else its lane's default."""
    own = _pending_age_target(str(catalog.root), template)
    if own is not None:
        return own
    if lane == CRITICAL:
        return settings.alert_pending_age_critical_seconds
    return settings.alert_pending_age_bulk_seconds


def pending_too_long(
    session: Session, settings: Settings, now: dt.datetime, catalog: TemplateCatalog
) -> list[Condition]:
    shortest_target = min(
        [settings.alert_pending_age_critical_seconds, settings.alert_pending_age_bulk_seconds]
        + [t for name in catalog.names() if (t := _pending_age_target(str(catalog.root), name))]
    )
    # only intents older than every target: an index range
    rows = alerts.oldest_pending_by_template(session, _ago(now, shortest_target))
    found = []
    for template, lane, oldest in rows:
        age_seconds = (now - oldest).total_seconds()
        target = pending_age_target(catalog, settings, template, lane)
        if age_seconds > target:
            summary = (
                f"oldest pending {template} mail is {format_age(age_seconds)} old "
                f"(target {format_age(target)})"
            )
            details = {"template": template, "lane": lane, "age_seconds": int(age_seconds)}
            found.append(Condition(f"{PENDING_AGE}:{template}", summary, details))
    return found


def breakers_open(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    return [
        Condition(
            f"{BREAKER_OPEN}:{lane}",
            f"the {lane} lane is paused by its circuit breaker ({state})",
            {"lane": lane, "state": state, "failure_rate": rate},
        )
        for lane, state, rate in alerts.held_back_lanes(session)
    ]


def provider_auth_failures(
    session: Session, settings: Settings, now: dt.datetime
) -> list[Condition]:
    since = _ago(now, settings.alert_auth_window_seconds)
    count, code = alerts.count_replies_since(session, since, AUTH_FAILURE_CODES)
    if not count:
        return []
    summary = (
        f"the provider refused our credentials ({code}) {plural(count, 'time')}: "
        "check the configuration"
    )
    return [Condition(PROVIDER_AUTH, summary, {"count": count, "code": code})]


def rate_summary(rate: SenderRate) -> str:
    """Word a rate as the dashboard does: "complaint rate, last 24 h: 6.25 % (1 of 16), ..."."""
    label = send_budget.RATE_WINDOWS[rate.window][0]
    figures = f"{format_percent(rate.rate)} ({rate.count} of {rate.submitted})"
    limit = format_basis_points(rate.limit_basis_points)
    return f"{RATE_NOUNS[rate.kind]} rate, {label}: {figures}, limit {limit}"


def sender_rates_over_limit(
    session: Session, settings: Settings, now: dt.datetime
) -> list[Condition]:
    """Permanent bounces or complaints at or over the limits mailbox providers enforce."""
    found = []
    for (kind, window), rate in sorted(sender_rates(session, now).items()):
        if not rate.over_limit:
            continue
        summary = rate_summary(rate)
        details = {"kind": kind, "window": window, "count": rate.count,
                   "submitted": rate.submitted}  # fmt: skip
        found.append(Condition(f"{SENDER_RATE}:{kind}:{window}", summary, details))
    return found


CHECKS = (
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


def webhook_payload(row: AlertState, due: str) -> dict[str, Any]:
    """Return the JSON body posted to the webhook for `row`."""
    return {
        "source": "outbox-console",
        "condition": row.condition,
        "state": due,
        "summary": row.summary,
        "details": row.details or {},
        "fired_at": row.fired_at.isoformat() if row.fired_at else None,
        "cleared_at": row.cleared_at.isoformat() if row.cleared_at and due == RESOLVED else None,
    }


Poster = Callable[..., httpx.Response]


def deliver_webhooks(
    session_factory: Callable[[], Session],
    settings: Settings,
    now: dt.datetime,
    post: Poster = httpx.post,
) -> tuple[int, int]:
    """POST every transition not yet delivered; return (sent, failed)."""
    stale_before = _ago(now, WEBHOOK_RETRY_SECONDS)
    sent = failed = 0
    for row in alerts.load_alerts_owing_webhook(session_factory):
        due = row.webhook_due
        if not alerts.claim_alert_webhook(session_factory, row.condition, due, now, stale_before):
            continue
        if _post(post, settings, webhook_payload(row, due)):
            alerts.mark_alert_notified(session_factory, row.condition, due, utcnow())
            sent += 1
        else:
            failed += 1
    return sent, failed


def _post(post: Poster, settings: Settings, payload: dict[str, Any]) -> bool:
    try:
        response = post(
            settings.alert_webhook_url,
            json=payload,
            timeout=settings.alert_webhook_timeout_seconds,
        )
    except httpx.HTTPError as exc:
        log.warning(
            "alert webhook unreachable",
            extra={"condition": payload["condition"], "error_type": type(exc).__name__},
        )
        return False
    if not response.is_success:
        log.warning(
            "alert webhook refused the alert",
            extra={"condition": payload["condition"], "code": response.status_code},
        )
    return response.is_success


def run_alert_cycle(
    session_factory: Callable[[], Session],
    settings: Settings,
    *,
    now: dt.datetime | None = None,
    catalog: TemplateCatalog | None = None,
    post: Poster = httpx.post,
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
