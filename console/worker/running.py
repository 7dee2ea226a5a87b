"""How the worker runs: in a process of its own (``console worker``) or inside
``console serve``.

``run_loop`` is ``console worker``'s loop: tick until stopped, at once again while
batches come back full, else after the poll interval or as soon as it is woken (an
enqueue on PostgreSQL, a stop request); the process around it is
``console.commands.worker``. ``EmbeddedWorker``: in ``console serve`` an APScheduler job
runs the send loop every poll interval, one run at a time (``max_instances=1``,
``coalesce=True``: a slow run never piles up behind itself, and the scheduler's note of
each interval so skipped is not logged); a run drains while batches come back full or
an enqueue arrived meanwhile, and an enqueue committed in this process
(``console.wakeup``) brings the next run forward to now.

``RunFailures``: while the database is down every tick fails the same way; the first
failure is one line (no traceback) and the next success another. Any other failure is
logged each time, with its traceback.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from console import wakeup
from console.config import Settings
from console.worker.claim import record_clean_stop
from console.worker.loop import Worker
from console.worker.reporting import TickReport

log = logging.getLogger("console.worker.loop")


# DB-API's name for a lost connection, a server going away, a file that cannot be opened
CONNECTION_ERRORS = frozenset({"OperationalError", "InterfaceError"})


def is_connection_error(error: BaseException) -> bool:
    """Whether `error`, or what caused it, says the database cannot be reached."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 5:
        if getattr(current, "connection_invalidated", False):
            return True
        if {cls.__name__ for cls in type(current).__mro__} & CONNECTION_ERRORS:
            return True
        current, seen = current.__cause__, seen + 1
    return False


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error)
    return " ".join(text.split("\n", 1)[0].split()) or type(error).__name__


class RunFailures:
    """Logs each run's failure, a lost database only when it goes and when it is back."""

    def __init__(self, logger: logging.Logger, message: str, worker_id: str) -> None:
        self.logger = logger
        self.message = message  # what a failure other than a lost database is logged as
        self.fields = dict(worker_id=worker_id)
        self.database_down = False

    def failed(self, error: BaseException) -> None:
        """Log `error`, the failure of a run (call from its ``except`` block)."""
        if not is_connection_error(error):
            self.logger.exception(self.message, extra=self.fields)
        elif not self.database_down:
            self.database_down = True
            self.logger.error(
                f"the database cannot be reached ({_first_line(error)}); "
                "trying again every poll, quietly until it answers",
                extra={**self.fields, "error_type": type(error).__name__},
            )

    def succeeded(self) -> None:
        """A run went through: say so once if the database had been lost."""
        if self.database_down:
            self.database_down = False
            self.logger.info("the database answers again; sending resumes", extra=self.fields)


def run_loop(
    worker: Worker,
    *,
    poll_seconds: float,
    wake: threading.Event,
    after_first: Callable[[], None] | None = None,
) -> None:
    """Tick until ``worker.request_stop()``: again at once while batches come back full,
    else after `poll_seconds` or as soon as `wake` is set (an enqueue, a stop request).

    `after_first` runs once the first tick is over (the first batch is out sooner).
    """
    failures = RunFailures(log, "worker tick failed", worker.worker_id)
    while not worker.stopping:
        wake.clear()
        try:
            report = worker.run_once()
            failures.succeeded()
        except Exception as error:  # noqa: BLE001 - e.g. the database restarting: try again
            failures.failed(error)
            report = TickReport()
        if after_first is not None:
            after_first()
            after_first = None
        if report.claimed >= worker.settings.batch_size:
            continue
        wake.wait(poll_seconds)


JOB_ID = "send-loop"
SKIPPED_RUN = "maximum number of running instances reached"


def _not_a_skipped_run(record: logging.LogRecord) -> bool:
    """Drop APScheduler's warning that a run was skipped while one was under way."""
    return SKIPPED_RUN not in str(record.msg)


# the embedded worker's scheduler logs here; its other lines pass
_scheduler_log = logging.getLogger("apscheduler.scheduler.send_loop")
_scheduler_log.addFilter(_not_a_skipped_run)


class EmbeddedWorker:
    """A worker driven by a background scheduler in the web process."""

    def __init__(self, worker: Worker, poll_seconds: float, *, owns_engine: bool = False) -> None:
        self.worker = worker
        self.poll_seconds = poll_seconds
        self._owns_engine = owns_engine  # the worker's engine is disposed at shutdown
        # One pool thread: every run uses the same thread, database connection and event loop.
        self.scheduler = BackgroundScheduler(
            timezone=dt.UTC,
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            logger=_scheduler_log,
        )
        self._woken = threading.Event()
        self._busy = threading.Event()
        self._failures = RunFailures(log, "send loop run failed", worker.worker_id)
        self.runs = 0

    @property
    def running(self) -> bool:
        return bool(self.scheduler.running)

    def start(self) -> EmbeddedWorker:
        self.scheduler.add_job(
            self._drain,
            "interval",
            seconds=self.poll_seconds,
            id=JOB_ID,
            max_instances=1,
            coalesce=True,
            next_run_time=dt.datetime.now(dt.UTC),
        )
        wakeup.subscribe(self.wake)
        self.scheduler.start()
        return self

    def wake(self) -> None:
        """Run the send loop now (or once more, if a run is under way)."""
        self._woken.set()
        if not self._busy.is_set() and self.running:
            self.scheduler.modify_job(JOB_ID, next_run_time=dt.datetime.now(dt.UTC))

    def _drain(self) -> None:
        self._busy.set()
        try:
            while not self.worker.stopping:
                self._woken.clear()
                self.runs += 1
                report = self.worker.run_once()
                self._failures.succeeded()
                if report.claimed < self.worker.settings.batch_size and not self._woken.is_set():
                    break
        except Exception as error:  # noqa: BLE001 - logged; the next interval tries again
            self._failures.failed(error)
        finally:
            self._busy.clear()
        if self._woken.is_set() and not self.worker.stopping:
            self.wake()  # an enqueue landed between the last tick and the end of this run

    def shutdown(self) -> None:
        """Stop taking work, let the run in flight record its outcomes, close the worker,
        then write on its heartbeat that it stopped cleanly."""
        wakeup.unsubscribe(self.wake)
        self.worker.request_stop()
        self.scheduler.shutdown(wait=True)
        self.worker.close()
        worker = self.worker
        record_clean_stop(worker.session_factory, worker.worker_id, worker.clock())
        if self._owns_engine:
            worker.session_factory.kw["bind"].dispose()


def start_embedded_worker(settings: Settings, **worker_options) -> EmbeddedWorker:
    """Start the send loop in this process, driven by a background scheduler."""
    worker = Worker.from_settings(settings, **worker_options)
    embedded = EmbeddedWorker(worker, settings.poll_seconds, owns_engine=True).start()
    log.info("embedded worker started", extra=dict(worker_id=worker.worker_id))
    return embedded
