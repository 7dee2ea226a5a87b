"""The demo's traffic: a case assigned to a reviewer now and then, as an application would.

Each assignment queues its notice (console.demo.casework); after `cases` of them
the traffic stops, so the states the demo seeded stay in sight at the top of the lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from flask import Flask

from console.demo import casework
from console.models import utcnow
from console.web.extensions import db

TRAFFIC_SECONDS = 15.0
TRAFFIC_CASES = 8
REVIEWERS = (
    ("Ada Lovelace", "ada@example.com"),
    ("Grace Hopper", "grace@example.com"),
    ("Flaky Reviewer", "flaky.reviewer@example.org"),
)


class DemoTraffic:
    """A thread assigning a case now and then, as an application would, `cases` in all."""

    def __init__(
        self,
        app: Flask,
        interval_seconds: float = TRAFFIC_SECONDS,
        cases: int = TRAFFIC_CASES,
        on_assigned: Callable[[int, int], None] | None = None,
    ) -> None:
        self.app = app
        self.interval_seconds = interval_seconds
        self.cases = cases
        self.on_assigned = on_assigned  # (assigned so far, in all)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-traffic", daemon=True)

    def start(self) -> DemoTraffic:
        with self.app.app_context():
            casework.create_tables(db.engine)
        self._thread.start()
        return self

    def _run(self) -> None:
        first_case = int(utcnow().timestamp()) % 100_000  # new cases at every run
        for number in range(1, self.cases + 1):
            if self._stop.wait(self.interval_seconds):
                return
            self._assign(first_case + number)
            if self.on_assigned is not None:
                self.on_assigned(number, self.cases)

    def _assign(self, case_id: int) -> None:
        name, email = REVIEWERS[case_id % len(REVIEWERS)]
        with self.app.app_context():
            casework.assign_case(
                db.session,
                case_id=case_id,
                case_title=f"Refund request {case_id}",
                reviewer_id=case_id % len(REVIEWERS),
                reviewer_name=name,
                reviewer_email=email,
            )
            db.session.commit()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
