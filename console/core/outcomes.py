"""The four outcomes of an attempt and the verdict a classifier returns. Pure."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Classification:
    """The outcome of one attempt, with a short reason fit for the timeline."""

    outcome: str
    reason: str
    alert: bool = False  # a configuration problem, not the recipient's: tell an operator
    retry_after_seconds: float | None = None
