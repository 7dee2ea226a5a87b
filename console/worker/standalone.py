"""The loop of ``console worker``: tick until stopped, sleeping between ticks unless woken."""

from __future__ import annotations

import logging
import threading

from console.worker.loop import Worker
from console.worker.tick import TickReport

log = logging.getLogger("console.worker.loop")


def run_loop(worker: Worker, *, poll_seconds: float, wake: threading.Event) -> None:
    """Tick until ``worker.request_stop()``: again at once while batches come back full,
    else after `poll_seconds` or as soon as `wake` is set (an enqueue, a stop request).
    """
    while not worker.stopping:
        wake.clear()
        try:
            report = worker.run_once()
        except Exception:  # noqa: BLE001 - e.g. the database restarting: try again next poll
            log.exception("worker tick failed", extra=dict(worker_id=worker.worker_id))
            report = TickReport()
        if report.claimed >= worker.settings.batch_size:
            continue
        wake.wait(poll_seconds)
