"""The two-workers drill judges two workers racing for one queue, not the machine's speed.

Its workers live side by side for the whole drill, so with the other drills' 1 s lease a
send slowed past it (a busy machine) was taken back by the other worker's sweep and
recorded `ambiguous`: the drill then failed although nothing was sent twice. Here the
relay holds the first body's reply until the other worker has swept it, or for longer
than that lease if no sweep comes.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from console.drill import policies
from console.drill.context import DrillContext, wait_for
from console.drill.relay import DrillRelay, _Handler
from console.models import Intent
from console.vocabulary import AMBIGUOUS
from tests.support.drill_contexts import scratch_drill

pytestmark = pytest.mark.slow

HELD_SECONDS = 3.0  # past the drills' 1 s lease and the other worker's next polls


class _FirstReplyHeld(_Handler):
    """Answers the first body once `release()` holds, or after HELD_SECONDS."""

    def __init__(self) -> None:
        super().__init__()
        self.release = lambda: False
        self._first = True

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        if self._first:
            self._first = False
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, wait_for, self.release, HELD_SECONDS)
        return await super().handle_DATA(server, session, envelope)


class _SlowFirstReplyRelay(DrillRelay):
    def __init__(self) -> None:
        super().__init__()
        self.handler = _FirstReplyHeld()


def test_two_workers_drill_holds_when_a_send_outlasts_the_drills_lease(tmp_path):
    relay = _SlowFirstReplyRelay()
    with scratch_drill(tmp_path, relay) as ctx:
        relay.handler.release = lambda: _any_ambiguous(ctx)
        (result,) = policies.two_workers(ctx)
    assert result.passed, result.observed
    assert "8 of 8 submitted" in result.observed


def _any_ambiguous(ctx: DrillContext) -> bool:
    """Whether a sweep has taken an intent back after its body: it is `ambiguous`."""
    with ctx.sessions() as session:
        query = select(Intent.id).where(Intent.status == AMBIGUOUS).limit(1)
        return session.execute(query).first() is not None
