"""Alerts about the events endpoints themselves, not about any mail.

* ``ses_topic_unsubscribed`` — SNS confirmed that a topic unsubscribed
  ``/webhooks/ses``: no SES events arrive any more. It holds until SES events
  arrive again (after the topic is subscribed again).
* ``inbound_mail_at_events_endpoint`` — an SES receipt rule publishes inbound
  mail (``Received``) to the events topic: a set-up mistake. It holds while such
  a report arrived within ``CONSOLE_ALERT_DEAD_WINDOW_SECONDS``.

Both reports are stored (without the mail's content) and never matched; these
checks read them (``console.store.events``) for the alert cycle.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from console.config import Settings
from console.events import ses
from console.ops.alerts.condition import Condition
from console.store import endpoint_reports as events

SES_TOPIC_UNSUBSCRIBED = "ses_topic_unsubscribed"
INBOUND_AT_EVENTS = "inbound_mail_at_events_endpoint"


def endpoint_conditions(session: Session, settings: Settings, now: dt.datetime) -> list[Condition]:
    """The set-up problems of the events endpoints that hold at `now` (a check of the cycle)."""
    found = []
    unsubscribed_at = events.unsubscribed_since(session, ses.SOURCE)
    if unsubscribed_at is not None:
        summary = (
            "the SES topic was unsubscribed from /webhooks/ses: no SES events arrive; "
            "subscribe the endpoint to the topic again"
        )
        details = {"unsubscribed_at": unsubscribed_at.isoformat(timespec="seconds")}
        found.append(Condition(SES_TOPIC_UNSUBSCRIBED, summary, details))
    since = now - dt.timedelta(seconds=settings.alert_dead_window_seconds)
    count, newest = events.inbound_since(session, since)
    if count:
        summary = (
            f"inbound mail is arriving at the events endpoint ({count} in the last "
            f"{settings.alert_dead_window_seconds:.0f} s): an SES receipt rule publishes to "
            "the events topic; give inbound mail a topic of its own"
        )
        details = {"count": count, "newest": newest.isoformat(timespec="seconds")}
        found.append(Condition(INBOUND_AT_EVENTS, summary, details))
    return found
