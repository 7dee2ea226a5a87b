"""The demo's terminal after its banner: one quiet line per minute in which something happened.

The capture server's answers and the demo traffic's notices are counted as they
come; a thread prints each minute's tally (nothing for a quiet minute).
"""

from __future__ import annotations

import collections
import datetime as dt
import threading
from collections.abc import Callable

from console.core.plurals import plural
from console.demo.smtp_capture import HANGUP, CapturedMessage
from console.models import utcnow

MINUTE_SECONDS = 60.0
# how each answer of the capture server is told, by its first word
ANSWER_WORDS = {"250": "accepted", "451": "answered 451", "550": "refused (550)", HANGUP: "hung up"}


def answer_kind(answer: str) -> str:
    """The first word of a capture server's answer: "250", "451", "550" or "hangup"."""
    return answer.split(" ", 1)[0]


def activity_line(
    now: dt.datetime, answers: collections.Counter[str], traffic: tuple[int, int] | None
) -> str | None:
    """The minute's line: what the capture server answered, how far the demo traffic got.

    `traffic` is (cases assigned so far, cases in all), given when one was assigned
    this minute; None for a minute without messages or traffic.
    """
    if not answers and traffic is None:
        return None
    parts = []
    if answers:
        tally = ", ".join(
            f"{count} {ANSWER_WORDS.get(kind, kind)}" for kind, count in sorted(answers.items())
        )
        parts.append(f"{plural(answers.total(), 'message')} to the capture server ({tally})")
    if traffic is not None:
        assigned, total = traffic
        parts.append(f"demo traffic: {assigned} of {total} case notices queued")
    return f"{now:%H:%M} UTC  last minute: " + "; ".join(parts)


class Activity:
    """Counts what happens and prints one line a minute through `echo`."""

    def __init__(
        self, echo: Callable[[str], None], interval_seconds: float = MINUTE_SECONDS
    ) -> None:
        self.echo = echo
        self.interval_seconds = interval_seconds
        self._answers: collections.Counter[str] = collections.Counter()
        self._traffic: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-activity", daemon=True)

    def captured(self, message: CapturedMessage) -> None:
        """Count one answer of the capture server (its ``on_message``)."""
        with self._lock:
            self._answers[answer_kind(message.answer)] += 1

    def traffic(self, assigned: int, total: int) -> None:
        """Note that the demo traffic queued its `assigned`-th notice of `total`."""
        with self._lock:
            self._traffic = (assigned, total)

    def take_line(self, now: dt.datetime) -> str | None:
        """The line of what was counted since the last one, counting anew from here."""
        with self._lock:
            answers, traffic = self._answers, self._traffic
            self._answers, self._traffic = collections.Counter(), None
        return activity_line(now, answers, traffic)

    def start(self) -> Activity:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_seconds):
            line = self.take_line(utcnow())
            if line is not None:
                self.echo(line)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
