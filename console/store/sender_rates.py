"""Bounce and complaint rates against the limits mailbox providers enforce on senders.

A rate over a window is the intents that bounced permanently (or drew a
complaint) in the window divided by the intents submitted in it. Each figure is
one range count on a timestamp index: ``ix_email_intent_submitted_at`` and the
partial indexes of bounced and complained intents.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from console.events import PERMANENT
from console.models import Intent

BOUNCE = "bounce"
COMPLAINT = "complaint"
# providers want bounces under 2 % and complaints under 0.3 % of the mail sent
LIMIT_BASIS_POINTS = {BOUNCE: 200, COMPLAINT: 30}
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
    """Count rows whose `column` falls in each window, in one scan of the widest range."""
    per_window = [func.count(case((column >= start, 1))) for start in starts.values()]
    query = select(*per_window).where(column >= min(starts.values()), *conditions)
    return dict(zip(starts, session.execute(query).one(), strict=True))
