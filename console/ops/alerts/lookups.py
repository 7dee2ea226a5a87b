"""The alert of a provider's lookup API that keeps failing.

* ``provider_lookup_failing:<provider>`` — the last ``FAILURES_BEFORE_ALERT``
  lookups of the ``reconcile`` job of one process failed (refused, a 5xx, a
  timeout, an answer not in the documented shape): ambiguous sends wait for the
  provider's events or an operator. The summary names the last failure.

The job fires it (compare-and-set, notified as every alert is: the email, the
log, the webhook) and clears it once a lookup answers again or nothing is left
to ask. The alert cycle keeps it while it fires and the provider can still be
asked; it clears there once the settings no longer ask that provider.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.orm import Session, sessionmaker

from console.config import Settings
from console.core.asking import provider_that_answers
from console.ops.alerts.condition import Condition
from console.ops.alerts.firing import fire
from console.store import alerts
from console.transports.lookup_core import ProviderLookup

log = logging.getLogger(__name__)

LOOKUP_FAILING = "provider_lookup_failing"
FAILURES_BEFORE_ALERT = 3
_NEEDS = {
    "Postmark": "a server token of the sending server",
    "Mailgun": "an API key that may read the domain's events",
    "SendGrid": "Email Activity access, which needs SendGrid's email activity history add-on",
}


def failing_key(settings: Settings) -> str:
    return f"{LOOKUP_FAILING}:{settings.provider}"


def after_run(
    session_factory: sessionmaker[Session],
    settings: Settings,
    lookup: ProviderLookup,
    asked: int,
    now: dt.datetime,
) -> None:
    """Fire the alert after failures in a row; clear it once the provider answers again."""
    with session_factory() as session, session.begin():
        if lookup.failures_in_a_row >= FAILURES_BEFORE_ALERT:
            _fire(session, settings, lookup, now)
        elif asked == 0 or lookup.failures_in_a_row == 0:
            _clear(session, failing_key(settings), now)


def _fire(session: Session, settings: Settings, lookup: ProviderLookup, now) -> None:
    provider = lookup.provider
    summary = (
        f"{lookup.failures_in_a_row} lookups in a row at {provider} failed (the last: "
        f"{lookup.last_failure}): ambiguous sends wait for {provider}'s events or an "
        f"operator; the key needs {_NEEDS.get(provider, 'read access')}"
    )
    details = {"provider": provider, "failures": lookup.failures_in_a_row}
    fire(session, settings, Condition(failing_key(settings), summary[:1000], details), now)


def _clear(session: Session, key: str, now: dt.datetime) -> None:
    if key in alerts.load_active_alert_keys(session) and alerts.mark_alert_cleared(
        session, key, now
    ):
        log.info("alert condition cleared", extra={"condition": key, "stage": "alert"})


def lookup_conditions(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """The lookup alert while it fires and its provider is still asked (a check of the cycle)."""
    asked = provider_that_answers(settings.transport, settings.provider) is not None
    return [
        Condition(row.condition, row.summary or "", dict(row.details or {}))
        for row in alerts.load_firing_alerts(session)
        if asked and row.condition == failing_key(settings)
    ]
