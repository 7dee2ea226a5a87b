"""Signed requests already recorded in this process, so a replay within the window is refused.

A provider's signature carries a time; a request older than the tolerance is
refused by the verifier. Within the window, the key of each request (Svix's
message id and time, Mailgun's token, SendGrid's signature) is remembered once
its events are committed; the same key again is a replay. The memory is this
process's only: a replay that reaches another process finds its events already
recorded (UNIQUE source + event id) and changes nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MAX_REMEMBERED = 100_000


class ReplayGuard:
    """The keys of recently recorded signed requests, forgotten after `window_seconds`."""

    def __init__(self, window_seconds: float, max_entries: int = MAX_REMEMBERED) -> None:
        self.window_seconds = window_seconds
        self._max_entries = max_entries
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, key: str, now: float) -> bool:
        """Whether a request with `key` was recorded within the window."""
        with self._lock:
            self._forget_before(now - self.window_seconds)
            return key in self._seen

    def remember(self, key: str, now: float) -> None:
        """Note that the request with `key` was recorded at `now`."""
        with self._lock:
            self._seen[key] = now
            self._seen.move_to_end(key)
            while len(self._seen) > self._max_entries:
                self._seen.popitem(last=False)

    def _forget_before(self, cutoff: float) -> None:
        while self._seen:
            oldest_key, recorded_at = next(iter(self._seen.items()))
            if recorded_at >= cutoff:
                return
            del self._seen[oldest_key]
