"""An in-memory transport for tests of the send loop: scripted results, no network."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from console.core.send_result import SendResult
from console.transports.base import OutgoingEmail, StageCallback
from console.vocabulary import CONNECTING, DATA_SENT, ENVELOPE, REPLY_READ, STAGES


class MemoryTransport:
    """Accept every email, or answer a recipient's Nth attempt with its Nth scripted result.

    A scripted result's ``stage`` says how far the attempt gets: ``on_stage`` is
    called for every stage up to it, as a real transport would.
    """

    def __init__(self, script: Mapping[str, Iterable[SendResult]] | None = None) -> None:
        self.script = {recipient: list(results) for recipient, results in (script or {}).items()}
        self.sent: list[OutgoingEmail] = []  # every email whose body was handed over
        self._attempts: dict[str, int] = {}
        self._queue_ids = itertools.count(1)

    async def send(self, email: OutgoingEmail, on_stage: StageCallback) -> SendResult:
        result = self._next_result(email.recipient)
        reached = STAGES.index(result.stage)
        stage = STAGES[0]
        try:
            for next_stage in (CONNECTING, ENVELOPE, DATA_SENT):
                if STAGES.index(next_stage) > reached:
                    break
                await on_stage(email, next_stage)
                stage = next_stage
        except Exception as error:  # noqa: BLE001 - reported like any transport failure
            return SendResult(stage=stage, error=str(error), error_type=type(error).__name__)
        if reached >= STAGES.index(DATA_SENT):
            email.as_bytes()
            self.sent.append(email)
        return result

    def _next_result(self, recipient: str) -> SendResult:
        attempt = self._attempts.get(recipient, 0)
        self._attempts[recipient] = attempt + 1
        results = self.script.get(recipient)
        if not results:
            queue_id = f"mem-{next(self._queue_ids)}"
            return SendResult(
                REPLY_READ,
                code=250,
                reply_text=f"2.0.0 Ok: queued as {queue_id}",
                provider_message_id=queue_id,
            )
        return results[min(attempt, len(results) - 1)]

    async def close(self) -> None:
        """Nothing to release."""
