"""Records written together, in one transaction, up to a batch of them.

A record waits at most ``BATCH_WAIT_SECONDS`` for others to join it, fewer when the batch
fills; records that arrive while a batch is written form the next one. A batch is one
commit instead of one a record: on PostgreSQL each commit waits for the disk, on SQLite
each writes the pages it changed to the log (consecutive records change the same ones).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

# How long a record waits for others to go with it.
BATCH_WAIT_SECONDS = 0.01

WriteBatch = Callable[[list[dict[str, Any]]], Awaitable[list[bool]]]
Waiting = tuple[dict[str, Any], asyncio.Future]


class RecordBatches:
    """Hands the records waiting to `write_batch`, up to `size` at a time; each caller gets
    its own record's answer (or the batch's error)."""

    def __init__(self, write_batch: WriteBatch, size: int) -> None:
        self._write_batch = write_batch
        self._size = max(1, size)
        self._waiting: list[Waiting] = []
        self._writer: asyncio.Task | None = None
        self._full = asyncio.Event()

    async def record(self, values: dict[str, Any]) -> bool:
        """Write `values` with the records beside it; whether it was recorded."""
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append((values, answer))
        if len(self._waiting) >= self._size:
            self._full.set()
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_all())
        return await answer

    async def _write_all(self) -> None:
        try:
            while self._waiting:
                if len(self._waiting) < self._size:
                    self._full.clear()
                    try:
                        await asyncio.wait_for(self._full.wait(), BATCH_WAIT_SECONDS)
                    except TimeoutError:
                        pass  # the batch goes as it is
                batch, self._waiting = self._waiting[: self._size], self._waiting[self._size :]
                await self._write(batch)
        finally:
            self._writer = None

    async def _write(self, batch: list[Waiting]) -> None:
        try:
            recorded = await self._write_batch([values for values, _ in batch])
        except Exception as error:  # noqa: BLE001 - each caller raises it
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(error)
            return
        for (_, answer), each in zip(batch, recorded, strict=True):
            if not answer.done():
                answer.set_result(each)
