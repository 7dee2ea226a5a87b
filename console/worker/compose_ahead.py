"""The next waiting email, composed while the relay reads the body before it.

Rendering and serializing a message is local work; done after the ``data_sent``
mark of the email in flight, it fills the wait for the relay's reply instead of
holding the connection idle before the next envelope. A failure ahead is not kept:
the email is then composed again in its turn, where the failure is handled as before.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable

from console.core.send_result import SendResult
from console.store.claims import Claim
from console.transports.base import OutgoingEmail

Composed = OutgoingEmail | SendResult


class ComposeAhead:
    """Emails of a batch composed one step ahead of their sending."""

    def __init__(self, compose: Callable[[Claim], Composed], lookahead: int) -> None:
        self._compose = compose
        self._lookahead = max(1, lookahead)  # the claims next in line, one per connection
        self._ready: dict[int, Composed] = {}  # attempt id -> its email, serialized
        self._waiting: collections.deque[Claim] | None = None

    def start(self, waiting: collections.deque[Claim]) -> None:
        """Compose ahead from `waiting`, the claims of a batch not yet taken."""
        self._waiting = waiting
        self._ready.clear()

    def stop(self) -> None:
        """The batch is over: drop what was composed for claims that were not sent."""
        self._waiting = None
        self._ready.clear()

    def schedule(self) -> None:
        """Compose the next waiting email as soon as the event loop waits for the relay."""
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._compose_next)

    def take(self, claim: Claim) -> Composed:
        """The email of `claim`: the one composed ahead, else composed now."""
        ready = self._ready.pop(claim.attempt_id, None)
        return ready if ready is not None else self._compose(claim)

    def _compose_next(self) -> None:
        if not self._waiting:
            return
        for claim in itertools.islice(self._waiting, self._lookahead):
            if claim.attempt_id in self._ready:
                continue
            try:
                email = self._compose(claim)
                if isinstance(email, OutgoingEmail):
                    email.as_bytes()
            except Exception:  # noqa: BLE001 - composed again in its turn, failing there
                return
            self._ready[claim.attempt_id] = email
            return
