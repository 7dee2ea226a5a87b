"""The loop of ``console worker``: tick until stopped, at once again while batches come
back full, else after the poll interval or as soon as it is woken (an enqueue on
PostgreSQL, a stop request). The process around it is ``console.commands.worker``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from console.worker.loop import Worker
from console.worker.run_failures import RunFailures
from console.worker.tick import TickReport

log = logging.getLogger("console.worker.loop")


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
