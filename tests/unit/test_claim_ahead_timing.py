"""When the claim ahead starts: once the emails still waiting would take about as long to
go as the last claim took, so the next batch is ready as this one ends."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from console.worker.batch_claim import ClaimedBatch
from console.worker.claim_ahead import ClaimAhead

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


class TimedClaimer:
    """Claims nothing; its last claim took `claim_seconds`."""

    def __init__(self, claim_seconds: float | None) -> None:
        self.claim_seconds = claim_seconds
        self.claims: list[dt.datetime] = []

    async def claim(self, now, *, guarded=True) -> ClaimedBatch:
        self.claims.append(now)
        return ClaimedBatch([], [])

    async def give_back(self, leased, held_back, now) -> int:
        return len(leased)


def started(claim_seconds: float | None, taken: int, waiting: int, seconds_so_far: float):
    claimer = TimedClaimer(claim_seconds)
    ahead = ClaimAhead(claimer, lambda point: None)

    async def one_pop() -> bool:
        ahead.start_in_time(NOW, taken, waiting, time.monotonic() - seconds_so_far)
        running = ahead.running
        await ahead.give_back(NOW)
        return running

    return asyncio.run(one_pop())


def test_not_while_the_emails_waiting_take_longer_than_a_claim():
    # 10 emails in 0.1 s: 10 ms each; 10 waiting (0.1 s) against a claim of 0.05 s
    assert not started(0.05, taken=10, waiting=10, seconds_so_far=0.1)


def test_once_the_emails_waiting_take_about_a_claim():
    assert started(0.05, taken=10, waiting=4, seconds_so_far=0.1)


def test_as_the_last_email_goes_whatever_the_claim_took():
    assert started(None, taken=50, waiting=0, seconds_so_far=0.1)
    assert started(0.0, taken=50, waiting=0, seconds_so_far=0.1)
