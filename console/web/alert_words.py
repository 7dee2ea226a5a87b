"""The dashboard's line for each firing alert, with the figures as they are now.

An alert's summary is written once, when it fires; the banner reads the figures the
page shows (rates, latency, the oldest pending mail) so it never contradicts them.
Conditions with no figures of their own keep their summary, in readable words.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.core.readable import format_age, readable_text
from console.mail.catalog import default_catalog
from console.ops.alerts.checks import PENDING_AGE, SENDER_RATE, pending_age_target, rate_summary
from console.ops.metrics.delivery_figures import LATENCY_ALERT
from console.ops.metrics.hold_figures import HOLD_SET
from console.ops.metrics.send_budget_figures import SEND_QUOTA_REACHED
from console.state_tables import AlertState
from console.store import alerts

# shown elsewhere on the dashboard with current figures: the holds, the quota line
SHOWN_ELSEWHERE = (HOLD_SET, SEND_QUOTA_REACHED)


class Figures:
    """What the banner's lines read: the page's rates and latency, pending ages on demand."""

    def __init__(self, session: Session, settings, snapshot, delivery, now: dt.datetime):
        self.session, self.settings, self.now = session, settings, now
        self.rates, self.delivery = snapshot.sender_rates, delivery
        self._pending: dict[str, float] | None = None

    def oldest_pending_seconds(self, template: str) -> float | None:
        """The age of the template's oldest pending intent now; None when none is pending."""
        if self._pending is None:
            rows = alerts.oldest_pending_by_template(self.session, self.now)
            self._pending = {}
            for name, _, oldest in rows:
                age = (self.now - oldest).total_seconds()
                self._pending[name] = max(age, self._pending.get(name, 0.0))
        return self._pending.get(template)


def _rate_line(state: AlertState, figures: Figures) -> str | None:
    _, kind, window = state.condition.split(":", 2)
    rate = figures.rates.get((kind, window))
    if rate is None:
        return None
    said = rate_summary(rate)
    return said if rate.over_limit else said + "; back under the limit, the alert clears soon"


def _pending_line(state: AlertState, figures: Figures) -> str:
    template = state.condition.partition(":")[2]
    lane = (state.details or {}).get("lane", "")
    target = pending_age_target(default_catalog(), figures.settings, template, lane)
    age = figures.oldest_pending_seconds(template)
    target_words = f"target {format_age(target)}"
    if age is None:
        return f"no {template} mail is pending any more ({target_words})"
    return f"the oldest pending {template} mail is {format_age(age)} old ({target_words})"


def _latency_line(state: AlertState, figures: Figures) -> str | None:
    lane = state.condition.partition(":")[2]
    figure = figures.delivery.latency.get(lane)
    if figure is None or figure.p99_seconds is None:
        return None
    target = format_age(figures.delivery.targets[lane])
    return (
        f"{lane} mail: the p99 from enqueue to acceptance is {format_age(figure.p99_seconds)} "
        f"over the last hour (target {target})"
    )


_LINES: dict[str, Callable[[AlertState, Figures], str | None]] = {
    SENDER_RATE: _rate_line,
    PENDING_AGE: _pending_line,
    LATENCY_ALERT: _latency_line,
}


def alert_line(state: AlertState, figures: Figures | None) -> str | None:
    """The banner's words for a firing alert; None for one the dashboard shows elsewhere.

    Without `figures` (nothing read yet) it is the summary, in readable words.
    """
    kind = state.condition.partition(":")[0]
    if figures is not None and kind in SHOWN_ELSEWHERE:
        return None
    line = _LINES[kind](state, figures) if figures is not None and kind in _LINES else None
    line = line or readable_text(state.summary)
    return line[:1].upper() + line[1:] if line else None
