"""Critical intents due since a large batch was claimed, sent before the rest of it.

A claim takes the critical lane first, but a login code enqueued while a batch is
being sent waits for that batch to end. With the batch of several connections
(``CONSOLE_BATCH_SIZE`` unset: 50 a connection) that is several times 50 bulk
sends; so every ``CHECK_EVERY`` emails taken from a batch with more still waiting,
the worker looks for due critical intents (one read) and, when there are, claims
them in the same short transaction as a tick claims them beside a batch claimed
ahead (the breakers read, the critical lane only) and sends them next. The other
connections go on sending while it waits for the database. A login code then waits
behind about 50 bulk sends whatever the batch size. A look that fails is logged and
the batch goes on: the next claim takes the critical lane first anyway.

Not with a send budget (its tokens are taken by the tick's claim, in order).
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
from collections.abc import Callable

from console.store.claims import Claim
from console.worker.batch_claim import BatchClaimer, ClaimedBatch

log = logging.getLogger("console.worker.loop")
CHECK_EVERY = 50  # emails taken from a batch between two looks for critical intents


class CriticalCheck:
    """Counts the emails taken from the batch in flight; every ``CHECK_EVERY`` of them,
    claims the critical intents due meanwhile and puts them first in line."""

    def __init__(self, claimer: BatchClaimer, enabled: bool) -> None:
        self._claimer = claimer
        self._enabled = enabled
        self._taken = 0

    def start(self) -> None:
        """A batch begins."""
        self._taken = 0

    async def after_take(
        self, waiting: collections.deque[Claim], clock: Callable[[], dt.datetime]
    ) -> ClaimedBatch | None:
        """An email was taken from the batch, `waiting` the rest of it: on every
        ``CHECK_EVERY``-th with more waiting, the critical intents due by `clock` claimed
        and put first in `waiting`; what was claimed, or None when nothing was looked for,
        found or claimed."""
        self._taken += 1
        if not self._enabled or not waiting or self._taken % CHECK_EVERY:
            return None
        try:
            batch = await self._claimer.claim_critical(clock())
        except Exception:  # noqa: BLE001 - a bonus look: the next claim takes them first
            log.warning("could not look for critical intents during a batch", exc_info=True)
            return None
        if batch is not None:
            waiting.extendleft(reversed(batch.leased))
        return batch
