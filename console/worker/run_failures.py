"""How a loop around ``Worker.run_once`` logs its failures: a lost database once, not every tick.

While the database is down every tick fails the same way; the first failure is
one line (no traceback) and the next success another. Any other failure is
logged each time, with its traceback.
"""

from __future__ import annotations

import logging

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
