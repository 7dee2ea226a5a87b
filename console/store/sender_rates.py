"""Bounce and complaint rates against the limits mailbox providers enforce on senders.

A rate over a window is the intents that bounced permanently (or drew a complaint) in the window
divided by the intents submitted in it. Each figure is one range count on a timestamp index:
``ix_email_intent_submitted_at`` and the partial indexes of bounced and complained intents. The
dashboard shows them through CachedRates, so polling does not recount a week of mail every time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.events import PERMANENT
from console.models import Intent

BOUNCE = "bounce"
COMPLAINT = "complaint"
# providers want bounces under 2 % and complaints under 0.3 % of the mail sent
LIMIT_BASIS_POINTS = {BOUNCE: 200, COMPLAINT: 30}
RATES_MAX_AGE_SECONDS = 60.0  # how long a process shows the rates it counted
# name -> (label, span)
RATE_WINDOWS: dict[str, tuple[str, dt.timedelta]] = {
    "24h": ("last 24 h", dt.timedelta(hours=24)),
    "7d": ("last 7 days", dt.timedelta(days=7)),
}


@dataclasses.dataclass(frozen=True)
class SenderRate:
    """One rate over one window: `count` bounces or complaints per `submitted` intents."""

    kind: str  # BOUNCE | COMPLAINT
    window: str  # a key of RATE_WINDOWS
    count: int
    submitted: int

    @property
    def limit_basis_points(self) -> int:
        return LIMIT_BASIS_POINTS[self.kind]

    @property
    def rate(self) -> float | None:
        """The fraction, or None when nothing was submitted in the window."""
        return self.count / self.submitted if self.submitted else None

    @property
    def over_limit(self) -> bool:
        """At or above the providers' limit; any bounce or complaint counts when none was sent."""
        return self.count > 0 and self.count * 10_000 >= self.limit_basis_points * self.submitted


def sender_rates(session: Session, now: dt.datetime) -> dict[tuple[str, str], SenderRate]:
    """Return the rate of each kind over each window, keyed by (kind, window)."""
    starts = {window: now - span for window, (_, span) in RATE_WINDOWS.items()}
    submitted = _window_counts(session, Intent.submitted_at, [], starts)
    counts = {
        BOUNCE: _window_counts(
            session, Intent.bounced_at, [Intent.bounce_type == PERMANENT], starts
        ),
        COMPLAINT: _window_counts(session, Intent.complained_at, [], starts),
    }
    return {
        (kind, window): SenderRate(kind, window, per_window[window], submitted[window])
        for kind, per_window in counts.items()
        for window in RATE_WINDOWS
    }


def _window_counts(
    session: Session, column: Any, conditions: list, starts: dict[str, dt.datetime]
) -> dict[str, int]:
    """Count rows whose `column` falls in each window: one plain range count each.

    A bare count(*) over a range is what both databases count fastest from an
    index alone (SQLite's count(*) is five times a count of a CASE).
    """
    counts = {}
    for window, start in starts.items():
        query = select(func.count()).where(column >= start, *conditions)
        counts[window] = session.execute(query).scalar_one()
    return counts


class CachedRates:
    """The rates of one process, recounted at most every `max_age_seconds`.

    They move over hours, while every open dashboard asks every few seconds;
    each recount reads a week of submitted intents from the index.
    """

    def __init__(self, max_age_seconds: float = RATES_MAX_AGE_SECONDS) -> None:
        self.max_age_seconds = max_age_seconds
        self._lock = threading.Lock()
        self._counted_at: dt.datetime | None = None
        self._rates: dict[tuple[str, str], SenderRate] = {}

    def get(self, session: Session, now: dt.datetime) -> dict[tuple[str, str], SenderRate]:
        """The rates counted at most `max_age_seconds` before `now` (counted now if older)."""
        with self._lock:
            if not self._fresh(now):
                self._rates = sender_rates(session, now)
                self._counted_at = now
            return self._rates

    def forget(self) -> None:
        """Drop the counted rates: the next get counts them again."""
        with self._lock:
            self._counted_at = None

    def _fresh(self, now: dt.datetime) -> bool:
        if self._counted_at is None:
            return False
        age_seconds = (now - self._counted_at).total_seconds()
        return 0 <= age_seconds < self.max_age_seconds
