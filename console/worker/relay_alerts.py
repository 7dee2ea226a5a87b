"""Alerts the worker raises itself, naming the relay's reply.

* ``relay_refused:<lane>`` — the relay refused our session, sender or credentials
  (``504 5.5.2 ... Helo command rejected``, ``535 5.7.8``, "relaying denied"...): the
  lane's breaker is open and its intents wait, uncharged. It holds while that lane's
  breaker holds sends back.
* ``smtputf8_missing:<relay>`` — a non-ASCII address met a relay without SMTPUTF8: that
  intent failed, and will fail there every time. One alert per relay; it holds for
  ``CONSOLE_ALERT_DEAD_WINDOW_SECONDS`` after it fired.

The worker marks the condition firing (compare-and-set, in its own short transaction);
the alert cycle (``console.ops.alerts``, by ``ops.alerts.relay``) keeps it, clears it,
and posts the webhook.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from sqlalchemy.orm import Session

from console.store import alerts

log = logging.getLogger(__name__)

RELAY_REFUSED = "relay_refused"
SMTPUTF8_MISSING = "smtputf8_missing"
_REPLY_CHARS = 300


def raise_relay_refused(
    session: Session, *, lane: str, reply: str, reason: str, now: dt.datetime
) -> bool:
    """Fire ``relay_refused:<lane>`` naming `reply`; return whether this call fired it."""
    summary = (
        f"the relay refused the session ({reply[:_REPLY_CHARS]}): the {lane} lane is paused "
        "and its mail waits; check CONSOLE_SMTP_EHLO_NAME, CONSOLE_MAIL_FROM, the credentials "
        "in CONSOLE_SMTP_URL and the relay's configuration"
    )
    details = {"lane": lane, "reply": reply[:_REPLY_CHARS], "reason": reason[:_REPLY_CHARS]}
    return _fire(session, f"{RELAY_REFUSED}:{lane}", summary, details, now)


def raise_smtputf8_missing(session: Session, *, relay: str, now: dt.datetime) -> bool:
    """Fire ``smtputf8_missing:<relay>``; return whether this call fired it."""
    summary = (
        f"the relay {relay} does not offer SMTPUTF8: mail to non-ASCII addresses fails "
        "there (RFC 6531); use a relay that offers it"
    )
    return _fire(session, f"{SMTPUTF8_MISSING}:{relay}", summary, {"relay": relay}, now)


def _fire(session: Session, key: str, summary: str, details: dict[str, Any], now) -> bool:
    fired = alerts.mark_alert_firing(session, key, summary, details, now)
    if fired:
        log.error(summary, extra={"condition": key, "stage": "alert"})
    return fired
