"""Per-domain back-off, as pure decisions.

A recipient domain that sends throttling signals (``console.core.throttle_signals``)
several times in a row (``run_length``) is throttling us: rather than let every other
due intent for that domain hit it again, defer them all. The first deferral lasts
``base_seconds``, each further run without an acceptance in between doubles it, up to
``cap_seconds``. An accepted or permanently refused message shows the domain answers
normally and forgets its history. Any other 4yz (a full mailbox, ``4.3.0``, a
greylisted first try) is that message's retry: it neither counts nor ends a run, so a
message-level failure between two signals does not hide a throttling domain.
Connection failures and timeouts say nothing about a domain (the relay is shared) and
are ignored, as are ambiguous outcomes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import OrderedDict

from console.core.throttle_signals import Reply, is_signal
from console.vocabulary import ACCEPTED, PERMANENT, TRANSIENT

MAX_TRACKED_DOMAINS = 10_000


@dataclasses.dataclass(frozen=True)
class DomainBackoffPolicy:
    run_length: int = 3
    base_seconds: float = 60.0
    cap_seconds: float = 3600.0

    def deferral_seconds(self, level: int) -> float:
        return min(self.base_seconds * 2 ** min(level, 32), self.cap_seconds)


@dataclasses.dataclass(frozen=True)
class Deferral:
    """Defer every due intent of `domain` until `until`."""

    domain: str
    until: dt.datetime
    level: int  # 0 for the first deferral of a run of runs


@dataclasses.dataclass
class _History:
    run: int = 0
    level: int = 0


def recipient_domain(address: str) -> str:
    """Return the lower-cased domain of an address (empty when it has none)."""
    return address.rpartition("@")[2].strip().lower()


def is_domain_throttle(outcome: str, reply: Reply | None) -> bool:
    """Return whether a transient outcome came with a throttling signal from the domain."""
    return outcome == TRANSIENT and is_signal(reply)


class DomainRuns:
    """Consecutive throttling signals per recipient domain, seen by one worker."""

    def __init__(self, policy: DomainBackoffPolicy, max_domains: int = MAX_TRACKED_DOMAINS):
        self.policy = policy
        self._max_domains = max_domains
        self._histories: OrderedDict[str, _History] = OrderedDict()

    def record(
        self, domain: str, outcome: str, reply: Reply | None, now: dt.datetime
    ) -> Deferral | None:
        """Take one outcome for `domain`; return a deferral when a run is complete."""
        if not domain:
            return None
        if outcome in (ACCEPTED, PERMANENT):
            self._histories.pop(domain, None)
            return None
        if not is_domain_throttle(outcome, reply):
            return None
        history = self._history(domain)
        history.run += 1
        if history.run < self.policy.run_length:
            return None
        seconds = self.policy.deferral_seconds(history.level)
        deferral = Deferral(domain, now + dt.timedelta(seconds=seconds), history.level)
        history.run = 0
        history.level += 1
        return deferral

    def _history(self, domain: str) -> _History:
        history = self._histories.pop(domain, None) or _History()
        self._histories[domain] = history  # most recently seen last
        while len(self._histories) > self._max_domains:
            self._histories.popitem(last=False)
        return history
