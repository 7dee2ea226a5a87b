"""Alerts: spot conditions an operator must act on, tell the targets once per condition.

Conditions (each read with a small query on indexed columns):

* ``dead_letter`` — an intent was dead-lettered within the last window;
* ``ambiguous_waiting`` — an intent has waited in ``ambiguous`` longer than allowed;
* ``pending_age:<template>`` — the oldest pending intent of a template is older than
  its target (``pending_age_target_seconds`` in the template's settings.toml, else
  the lane's default);
* ``breaker_open:<lane>`` — the lane's circuit breaker holds sends back;
* ``provider_auth`` — the provider answered 401/403 (HTTP) or 530/535 (SMTP).

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
from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from console.config import Settings
from console.mail.render import TemplateCatalog, default_catalog
from console.models import AlertState, Attempt, Intent, LaneBreaker, utcnow
from console.outbox import enqueue
from console.store.sender_rates import sender_rates
from console.vocabulary import AMBIGUOUS, CRITICAL, DEAD, PENDING

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
FIRING, RESOLVED = "firing", "resolved"


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


def _changed_at():
    return func.coalesce(Intent.updated_at, Intent.created_at)


def dead_letters(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    since = _ago(now, settings.alert_dead_window_seconds)
    count, newest = session.execute(
        select(func.count(), func.max(Intent.id)).where(
            Intent.status == DEAD, _changed_at() >= since
        )
    ).one()
    if not count:
        return []
    summary = (
        f"{count} intent(s) dead-lettered in the last {settings.alert_dead_window_seconds:.0f} s"
    )
    return [Condition(DEAD_LETTER, summary, {"count": count, "newest_intent_id": newest})]


def ambiguous_waiting(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    threshold = settings.alert_ambiguous_after_seconds
    count, oldest = session.execute(
        select(func.count(), func.min(_changed_at())).where(
            Intent.status == AMBIGUOUS, _changed_at() < _ago(now, threshold)
        )
    ).one()
    if not count:
        return []
    waited = (now - oldest).total_seconds()
    summary = f"{count} ambiguous intent(s) waiting longer than {threshold:.0f} s"
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
    rows = session.execute(  # only intents older than every target: an index range
        select(Intent.template, Intent.lane, func.min(Intent.created_at))
        .where(Intent.status == PENDING, Intent.created_at < _ago(now, shortest_target))
        .group_by(Intent.template, Intent.lane)
    ).all()
    found = []
    for template, lane, oldest in rows:
        age_seconds = (now - oldest).total_seconds()
        target = pending_age_target(catalog, settings, template, lane)
        if age_seconds > target:
            summary = (
                f"oldest pending {template} mail is {age_seconds:.0f} s old (target {target:.0f} s)"
            )
            details = {"template": template, "lane": lane, "age_seconds": int(age_seconds)}
            found.append(Condition(f"{PENDING_AGE}:{template}", summary, details))
    return found


def breakers_open(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    rows = session.execute(
        select(LaneBreaker.lane, LaneBreaker.state, LaneBreaker.failure_rate).where(
            LaneBreaker.state != "closed"
        )
    ).all()
    return [
        Condition(
            f"{BREAKER_OPEN}:{lane}",
            f"the {lane} lane is paused by its circuit breaker ({state})",
            {"lane": lane, "state": state, "failure_rate": rate},
        )
        for lane, state, rate in rows
    ]


def provider_auth_failures(
    session: Session, settings: Settings, now: dt.datetime
) -> list[Condition]:
    since = _ago(now, settings.alert_auth_window_seconds)
    count, code = session.execute(
        select(func.count(), func.max(Attempt.reply_code)).where(
            Attempt.started_at >= since, Attempt.reply_code.in_(AUTH_FAILURE_CODES)
        )
    ).one()
    if not count:
        return []
    summary = (
        f"the provider refused our credentials ({code}) {count} time(s): check the configuration"
    )
    return [Condition(PROVIDER_AUTH, summary, {"count": count, "code": code})]


def sender_rates_over_limit(
    session: Session, settings: Settings, now: dt.datetime
) -> list[Condition]:
    """Permanent bounces or complaints at or over the limits mailbox providers enforce."""
    found = []
    for (kind, window), rate in sorted(sender_rates(session, now).items()):
        if not rate.over_limit:
            continue
        summary = (
            f"{kind} rate over the {window} window is {rate.count}/{rate.submitted} "
            f"(limit {rate.limit_basis_points / 100:g} %)"
        )
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


def _insert_ignoring_conflict(session: Session, values: dict[str, Any]) -> bool:
    """INSERT the row unless its condition exists; return whether it was inserted."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = (
        insert(AlertState)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["condition"])
        .returning(AlertState.condition)
    )
    return session.execute(statement).scalar_one_or_none() is not None


def fire(session: Session, condition: Condition, now: dt.datetime) -> bool:
    """Mark `condition` active unless it already is; return whether this call did it."""
    values = dict(
        active=True,
        summary=condition.summary,
        details=condition.details,
        fired_at=now,
        cleared_at=None,
        webhook_due=FIRING,
        webhook_claimed_at=None,
    )
    if _insert_ignoring_conflict(session, dict(condition=condition.key, **values)):
        return True
    flipped = session.execute(
        update(AlertState)
        .where(AlertState.condition == condition.key, AlertState.active.is_(False))
        .values(**values)
    ).rowcount
    return flipped == 1


def clear(session: Session, key: str, now: dt.datetime) -> bool:
    """Mark condition `key` cleared if it is active; return whether this call did it."""
    flipped = session.execute(
        update(AlertState)
        .where(AlertState.condition == key, AlertState.active.is_(True))
        .values(active=False, cleared_at=now, webhook_due=RESOLVED, webhook_claimed_at=None)
    ).rowcount
    return flipped == 1


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


def update_states(
    session: Session, settings: Settings, conditions: list[Condition], now: dt.datetime
) -> tuple[list[str], list[str]]:
    """Fire new conditions and clear those that no longer hold; return (fired, cleared)."""
    holding = {c.key for c in conditions}
    active = set(
        session.execute(select(AlertState.condition).where(AlertState.active.is_(True))).scalars()
    )
    fired = []
    for condition in conditions:
        if condition.key not in active and fire(session, condition, now):
            fired.append(condition.key)
            if settings.alert_email:
                _enqueue_alert_email(session, settings, condition, now)
            log.error(condition.summary, extra={"condition": condition.key, "stage": "alert"})
    cleared = [key for key in sorted(active - holding) if clear(session, key, now)]
    for key in cleared:
        log.info("alert condition cleared", extra={"condition": key, "stage": "alert"})
    return fired, cleared


def _claim_webhook(session: Session, key: str, due: str, now: dt.datetime) -> bool:
    stale = _ago(now, WEBHOOK_RETRY_SECONDS)
    claimed = session.execute(
        update(AlertState)
        .where(
            AlertState.condition == key,
            AlertState.webhook_due == due,
            or_(AlertState.webhook_claimed_at.is_(None), AlertState.webhook_claimed_at < stale),
        )
        .values(webhook_claimed_at=now)
    ).rowcount
    return claimed == 1


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
    with session_factory() as session:
        due_rows = (
            session.execute(select(AlertState).where(AlertState.webhook_due.is_not(None)))
            .scalars()
            .all()
        )
    sent = failed = 0
    for row in due_rows:
        due = row.webhook_due
        with session_factory() as session, session.begin():
            if not _claim_webhook(session, row.condition, due, now):
                continue
        if _post(post, settings, webhook_payload(row, due)):
            with session_factory() as session, session.begin():
                session.execute(
                    update(AlertState)
                    .where(
                        and_(AlertState.condition == row.condition, AlertState.webhook_due == due)
                    )
                    .values(webhook_due=None, webhook_sent_at=utcnow())
                )
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


def firing_alerts(session: Session) -> list[AlertState]:
    """Return the conditions firing now, oldest first (for the dashboard's banner)."""
    query = select(AlertState).where(AlertState.active.is_(True)).order_by(AlertState.fired_at)
    return list(session.execute(query).scalars())
