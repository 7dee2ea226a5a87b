"""Wake-up across processes on PostgreSQL: LISTEN for mail committed by any process.

``enqueue`` sends ``NOTIFY console_outbox`` inside the business transaction, so
PostgreSQL delivers it when (and only if) that transaction commits. A
``NotifyListener`` holds one connection in LISTEN mode on a background thread
and turns each notification into an in-process ``console.wakeup.notify()`` —
the same signal an in-process enqueue gives. Polling stays the durable
fallback: a lost connection only delays mail until the next poll, and each
reconnect wakes the workers once in case something was missed meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.engine import make_url

from console import wakeup
from console.store.intents import NOTIFY_CHANNEL

log = logging.getLogger(__name__)

WAIT_SECONDS = 1.0  # how long one wait for notifications lasts before checking for stop
RECONNECT_SECONDS = 2.0


def libpq_url(database_url: str) -> str:
    """Turn a SQLAlchemy ``postgresql+psycopg://`` URL into one psycopg accepts."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(False)


class NotifyListener:
    """LISTEN on the outbox channel in a daemon thread; call `on_notify` for each NOTIFY."""

    def __init__(
        self,
        database_url: str,
        on_notify: Callable[[], None] = wakeup.notify,
        channel: str = NOTIFY_CHANNEL,
    ) -> None:
        self._conninfo = libpq_url(database_url)
        self._on_notify = on_notify
        self._channel = channel
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-notify-listener", daemon=True)

    def start(self) -> NotifyListener:
        self._thread.start()
        return self

    def wait_listening(self, timeout_seconds: float) -> bool:
        """Block until the LISTEN is in place (for tests and start-up); return whether it is."""
        return self._listening.wait(timeout_seconds)

    def stop(self, timeout_seconds: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout_seconds)

    def _run(self) -> None:
        import psycopg  # on PostgreSQL only: a worker on SQLite never loads the driver

        while not self._stop.is_set():
            try:
                self._listen_until_stopped()
            except psycopg.Error as exc:
                self._listening.clear()
                log.warning(
                    "LISTEN connection lost; polling covers until it is back",
                    extra={"error_type": type(exc).__name__, "retry_in_seconds": RECONNECT_SECONDS},
                )
                self._stop.wait(RECONNECT_SECONDS)

    def _listen_until_stopped(self) -> None:
        import psycopg

        with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'LISTEN "{self._channel}"')
            self._listening.set()
            self._on_notify()  # whatever was committed while we were not listening
            while not self._stop.is_set():
                for _ in connection.notifies(timeout=WAIT_SECONDS):
                    self._on_notify()
                    if self._stop.is_set():
                        break


def listener_for(
    database_url: str, on_notify: Callable[[], None] = wakeup.notify
) -> NotifyListener | None:
    """Start and return a listener on a PostgreSQL database; None for SQLite (one process)."""
    if not database_url.startswith("postgresql"):
        return None
    return NotifyListener(database_url, on_notify).start()
