"""What a tick produces: its report, and each finished attempt on its way to T2."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt

from console.core.domain_backoff import Deferral
from console.core.lifecycle import Decision
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.store.claims import Claim


@dataclasses.dataclass
class TickReport:
    """What one tick did, for loops (was the batch full?) and tests."""

    claimed: int = 0
    swept: int = 0
    stale: int = 0
    released: int = 0
    statuses: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def add_status(self, status: str) -> None:
        """Count one intent that moved to `status`."""
        self.statuses[status] += 1

    def add_stale(self) -> None:
        """Count one record that found its lease taken (nothing written)."""
        self.stale += 1


@dataclasses.dataclass(frozen=True)
class FinishedAttempt:
    """One finished attempt on its way to T2."""

    claim: Claim
    result: SendResult
    classification: Classification
    decision: Decision
    now: dt.datetime
    deferral: Deferral | None = None  # the run of 4yz this outcome completed
