"""A clock that moves only when a test says so, and workers built the way the tests need them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from console.core.backoff import Backoff
from console.core.lifecycle import RetryPolicy
from console.models import utcnow
from console.transports.base import Transport
from console.worker.decisions import WorkerSettings
from console.worker.guard import GuardPolicy
from console.worker.loop import Worker

MAIL_FROM = "Shop <shop@example.com>"
BACKOFF = Backoff(30, 3600, 5)  # base, cap and floor in seconds: a first retry within 30 s
MAX_ATTEMPTS = 5
MAX_AGE_SECONDS = 86400.0


class TestClock:
    """A settable clock: ``clock()`` returns the current aware-UTC instant.

    It starts one second after the real time of its creation and stays there until
    told to move. The ``clock`` fixture also makes ``enqueue()`` stamp intents with it,
    so an intent enqueued in a test is due at the clock's reading however slow the
    machine; one enqueued with the real time (a clock made outside the fixture) is due
    only while that second of lead lasts.
    """

    __test__ = False  # a helper, not a test class for pytest to collect

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.now = self._aware(start) if start else utcnow() + dt.timedelta(seconds=1)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> dt.datetime:
        """Move forward by `seconds`; return the new instant."""
        self.now += dt.timedelta(seconds=seconds)
        return self.now

    def set(self, instant: dt.datetime) -> dt.datetime:
        """Move to `instant` (aware), forward or back; return it."""
        self.now = self._aware(instant)
        return self.now

    @staticmethod
    def _aware(instant: dt.datetime) -> dt.datetime:
        if instant.tzinfo is None:
            raise ValueError(f"{instant!r} has no time zone: the product's times are aware UTC")
        return instant.astimezone(dt.UTC)


def build_worker(
    session_factory: sessionmaker[Session],
    transport: Transport,
    *,
    clock: Callable[[], dt.datetime] | None = None,
    random: float | Callable[[], float] = 0.5,
    mail_from: str = MAIL_FROM,
    backoff: Backoff = BACKOFF,
    max_attempts: int = MAX_ATTEMPTS,
    max_age_seconds: float = MAX_AGE_SECONDS,
    batch_size: int = 50,
    lease_seconds: float = 300.0,
    concurrency: int = 1,
    guard_policy: GuardPolicy | None = None,
    suppress_refused_mailboxes: bool = True,
    provider: str | None = None,
    **worker_options,
) -> Worker:
    """Return a worker on `transport`; the caller closes it.

    `clock` defaults to the real time; a float `random` is the draw every back-off
    delay uses (0.5: half of each window). Batch size, lease and concurrency default
    to the product's; `worker_options` go to ``Worker`` as they are.
    """
    settings = WorkerSettings(
        mail_from=mail_from,
        retry=RetryPolicy(backoff, max_attempts, max_age_seconds),
        batch_size=batch_size,
        lease_seconds=lease_seconds,
        concurrency=concurrency,
        suppress_refused_mailboxes=suppress_refused_mailboxes,
        provider=provider,
    )
    draw = random if callable(random) else lambda: random
    return Worker(
        session_factory,
        transport,
        settings,
        clock=clock or utcnow,
        random=draw,
        guard_policy=guard_policy,
        **worker_options,
    )
