"""The embedded worker of ``console serve``: APScheduler drives the send loop in the web process.

An APScheduler job runs the send loop every poll interval, one run at a time
(``max_instances=1``, ``coalesce=True``: a slow run never piles up behind
itself, and the scheduler's note of each interval so skipped is not logged).
A run drains: it ticks again while batches come back full or an enqueue
arrived meanwhile. An enqueue committed in this process (``console.wakeup``)
brings the next run forward to now.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from console import wakeup
from console.config import Settings
from console.worker.housekeeping import record_clean_stop
from console.worker.loop import Worker
from console.worker.run_failures import RunFailures

log = logging.getLogger(__name__)

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
