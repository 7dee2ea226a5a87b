"""The queue's own alert conditions, each read with a small query on indexed columns.

* ``dead_letter`` — an intent was dead-lettered within the last window;
* ``ambiguous_waiting`` — an intent has waited in ``ambiguous`` longer than allowed;
* ``pending_age:<template>`` — the oldest pending intent of a template is older than
  its target (``pending_age_target_seconds`` in the template's settings.toml, else
  the lane's default);
* ``breaker_open:<lane>`` — the lane's circuit breaker holds sends back;
* ``provider_auth`` — the provider answered 401/403 (HTTP) or 530/535 (SMTP);
* ``sender_rate:<kind>:<window>`` — permanent bounces or complaints at or over the
  limits mailbox providers enforce.
"""

from __future__ import annotations

import datetime as dt
import functools
import tomllib
from pathlib import Path

from sqlalchemy.orm import Session

from console.config import Settings
from console.core.plurals import plural
from console.core.readable import format_age, format_basis_points, format_percent, format_window
from console.mail.catalog import TemplateCatalog
from console.ops.alerts.condition import Condition
from console.store import alerts
from console.store.sender_rates import BOUNCE, COMPLAINT, RATE_WINDOWS, SenderRate, sender_rates
from console.vocabulary import CRITICAL

DEAD_LETTER = "dead_letter"
AMBIGUOUS_WAITING = "ambiguous_waiting"
PENDING_AGE = "pending_age"
BREAKER_OPEN = "breaker_open"
PROVIDER_AUTH = "provider_auth"
SENDER_RATE = "sender_rate"
AUTH_FAILURE_CODES = (401, 403, 530, 535)
RATE_NOUNS = {BOUNCE: "permanent bounce", COMPLAINT: "complaint"}


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
    label = RATE_WINDOWS[rate.window][0]
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
