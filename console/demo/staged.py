"""What the demo stages on purpose, said once in the banner and not again as errors.

Its history holds a permanent bounce and a complaint among a few sent messages (rates
over the limits mailbox providers enforce), and its capture server makes some mail
dead; the dashboard shows them as alerts. On the terminal those lines are info, not
errors, so a newcomer does not read them as breakage.
"""

from __future__ import annotations

import logging

from console.vocabulary import DEAD

STAGED = (
    "a dead letter, and bounce and complaint rates over their limits: "
    "the dashboard shows them as alerts, nothing is broken"
)
STAGED_CONDITIONS = ("dead_letter", "sender_rate:")
DECISION_LOGGER = "console.worker.loop"


def is_staged(record: logging.LogRecord) -> bool:
    """Whether `record` reports a condition the demo stages on purpose."""
    condition = getattr(record, "condition", None)
    if isinstance(condition, str) and condition.startswith(STAGED_CONDITIONS):
        return True
    return record.name == DECISION_LOGGER and getattr(record, "decision", None) == DEAD


class StagedLines(logging.Filter):
    """Show a staged condition's error line at info, so a terminal at warning leaves it out."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO and is_staged(record):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= self.level
