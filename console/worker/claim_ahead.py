"""The next batch claimed while the last emails of a full batch are still being sent.

Between two batches the worker's connections wait for the next claim. To a
database across a network a claim is several round trips, a large share of a
batch's time, so there the next claim is awaited in a task of its own while the
batch's last emails go, and the next tick takes that batch instead of claiming.
It starts once the emails still waiting would take about as long to go as the
last claim took. Only on PostgreSQL, and only when its round trips say it is
across a network (``SendStore.far``): next door the claim's work competed with
the sends for the interpreter and cost more than it saved (docs/benchmarks.md).

The claim ahead is the same T1, one batch earlier; nothing else changes:

- its leases and ``claimed`` attempts are committed before the tick that sends
  them: a crash leaves them to the lease sweep like any claim never handed over;
- the breakers are read again when its tick starts, and a lane that may no longer
  send a full batch gets its intents back (``BatchClaimer.claim_beside``);
- critical intents due since the claim ahead are claimed then and go first: a
  bulk backlog still delays a login code by at most the batch in flight;
- a stop or ``close`` gives the batch back, no attempt counted;
- no claim ahead when the batch was not full, while the relay refuses a lane,
  or with a send budget (its tokens are taken by the claim, in order).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from console.worker.batch_claim import BatchClaimer, ClaimedBatch

log = logging.getLogger("console.worker.loop")


class ClaimAhead:
    """At most one claim awaited in a task of its own, taken by the next tick."""

    def __init__(self, claimer: BatchClaimer, crash_if: Callable[[str], None]) -> None:
        self._claimer = claimer
        self._crash_if = crash_if
        self._running: asyncio.Task[ClaimedBatch] | None = None

    @property
    def running(self) -> bool:
        """True from ``start`` until the batch is taken or given back."""
        return self._running is not None

    def start_in_time(self, now: dt.datetime, taken: int, waiting: int, began: float) -> None:
        """Start the claim of the batch due at `now` once the `waiting` emails of this batch
        (`taken` of it on their way since `began`, a monotonic time) will take about as long
        to go as the last claim took: the next batch is then ready as this one ends."""
        seconds_an_email = (time.monotonic() - began) / max(taken, 1)
        if waiting * seconds_an_email <= (self._claimer.claim_seconds or 0.0):
            self.start(now)

    def start(self, now: dt.datetime) -> None:
        """Start the claim of the batch due at `now` in a task; return at once."""
        if self._running is not None:
            raise RuntimeError("a claim ahead is already running")
        self._running = asyncio.ensure_future(self._claim(now))

    async def take(self, now: dt.datetime) -> tuple[ClaimedBatch, int] | None:
        """The batch claimed ahead as its tick at `now` is to send it, and how many of its
        intents went back (``BatchClaimer.claim_beside``); None when none was started.
        The claim's error is raised here."""
        batch = await self._finished()
        return None if batch is None else await self._claimer.claim_beside(batch, now)

    async def give_back(self, now: dt.datetime) -> tuple[ClaimedBatch, int] | None:
        """Give a batch claimed ahead back, no attempt counted (a stop, ``close``): the
        batch and how many went back, or None when none was claimed. A database that
        fails here is logged, not raised: the leases then expire and the sweep gives
        the intents back as it does after a crash."""
        try:
            batch = await self._finished()
        except Exception:  # noqa: BLE001 - its transaction rolled back: nothing was leased
            log.warning("the claim ahead failed; nothing to give back", exc_info=True)
            return None
        if batch is None:
            return None
        try:
            return batch, await self._claimer.give_back(batch.leased, [], now)
        except Exception:  # noqa: BLE001 - see above
            log.warning("could not give back the batch claimed ahead", exc_info=True)
            return batch, 0

    async def _finished(self) -> ClaimedBatch | None:
        running, self._running = self._running, None
        return None if running is None else await running

    async def _claim(self, now: dt.datetime) -> ClaimedBatch:
        """T1 without the guard's memory (the breakers are read again when the batch's
        tick starts)."""
        batch = await self._claimer.claim(now, guarded=False)
        self._crash_if("claimed_ahead")
        return batch
