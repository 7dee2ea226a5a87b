"""The four outcomes of an attempt and the verdict a classifier returns. Pure."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Classification:
    """The outcome of one attempt, with a short reason fit for the timeline."""

    outcome: str
    reason: str
    alert: bool = False  # a configuration problem, not the recipient's: tell an operator
    retry_after_seconds: float | None = None
    # what a refusal blames (console.core.blame): "session", "recipient", "message" or None
    blamed: str | None = None

    @property
    def blames_session(self) -> bool:
        """A refusal of our session, sender or configuration: pause, do not fail the intent."""
        return self.blamed == "session"
