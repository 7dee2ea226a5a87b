"""Login throttling that an attacker cannot turn against the console's users.

Failures are counted in the database (``store.login_failures``), shared by every
process and kept across restarts, in two ways:

- per (username, client address): the first ``free_failures`` cost nothing, each
  further one makes that pair wait twice as long as the last (up to
  ``max_delay_seconds``) — a delay, never a lock, and only for that address;
- per client address: more than ``address_limit`` failures within
  ``address_window_seconds`` block that address alone until the window ends.

So failures from one address never stop a correct login from another: behind a
reverse proxy, set CONSOLE_TRUSTED_PROXIES so the address is the client's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from flask import current_app
from sqlalchemy.orm import Session

from console.models import utcnow
from console.store import login_failures
from console.store.accounts import username_key
from console.store.login_failures import ANY_USER

EXTENSION = "console.login_throttle"


class LoginThrottle:
    """The throttling policy; the caller's session holds the counts and the caller commits."""

    def __init__(
        self,
        *,
        free_failures: int = 3,
        max_delay_seconds: float = 900.0,
        forget_after_seconds: float = 3600.0,
        address_limit: int = 30,
        address_window_seconds: float = 900.0,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.free_failures = free_failures
        self.max_delay_seconds = max_delay_seconds
        self.forget_after = dt.timedelta(seconds=forget_after_seconds)
        self.address_limit = address_limit
        self.address_window = dt.timedelta(seconds=address_window_seconds)
        self._clock = clock

    def delay_after(self, failures: int) -> float:
        """Seconds a pair waits after its `failures`-th failure: 0, then 2, 4, 8... to the cap."""
        extra = failures - self.free_failures
        if extra <= 0:
            return 0.0
        return float(min(self.max_delay_seconds, 2 ** min(extra, 32)))

    def retry_after_seconds(self, session: Session, username: str, address: str) -> float:
        """Return 0 when this login may be tried now, else how many seconds to wait."""
        now = self._clock()
        wait = 0.0
        key = username_key(username)
        pair = None if key == ANY_USER else login_failures.read_count(session, key, address)
        if pair is not None and pair.retry_at is not None:
            wait = max(wait, (pair.retry_at - now).total_seconds())
        total = login_failures.read_count(session, ANY_USER, address)
        if total is not None and total.failures >= self.address_limit:
            window_ends = total.first_failure_at + self.address_window
            wait = max(wait, (window_ends - now).total_seconds())
        return max(0.0, wait)

    def record_failure(self, session: Session, username: str, address: str) -> None:
        """Count a failed login of `username` from `address` (no commit).

        A blank username is no pair: it counts against the address alone.
        """
        now = self._clock()
        key = username_key(username)
        if key != ANY_USER:
            self._count_pair_failure(session, key, address, now)
        window = self.address_window
        login_failures.count_failure(
            session, ANY_USER, address, now=now, forget_after=window, window=window
        )
        login_failures.forget_older_than(session, now - max(self.forget_after, self.address_window))

    def _count_pair_failure(
        self, session: Session, key: str, address: str, now: dt.datetime
    ) -> None:
        pair = login_failures.count_failure(
            session, key, address, now=now, forget_after=self.forget_after
        )
        delay = self.delay_after(pair.failures)
        if delay:
            retry_at = now + dt.timedelta(seconds=delay)
            login_failures.set_retry_at(session, key, address, retry_at)

    def record_success(self, session: Session, username: str, address: str) -> None:
        """Forget the failures of this pair; the address keeps its count (no commit)."""
        key = username_key(username)
        if key != ANY_USER:
            login_failures.forget(session, key, address)


def login_throttle() -> LoginThrottle:
    """The running app's throttle (a test may put its own in ``app.extensions``)."""
    return current_app.extensions.setdefault(EXTENSION, LoginThrottle())


def wait_message(seconds: float) -> str:
    """Say how long to wait, in words."""
    if seconds < 90:
        return f"Too many failed logins. Try again in {max(1, round(seconds))} s."
    return f"Too many failed logins. Try again in about {round(seconds / 60)} min."
