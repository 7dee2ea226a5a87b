"""The T2 records of a batch, written in order by one task while the sends go on.

A finished attempt is ``post``-ed and the sender moves on to its next email. One task
writes what is waiting: the outcomes posted while a record statement is out make the
next group (``SendWrites.group_size`` at most, one statement on PostgreSQL). ``room``
makes a sender wait while a group is out and a full one waits behind it, so a kill
leaves at most two groups unrecorded; ``drain`` waits for every record posted and
raises the first error met. After an error the records behind it are still written.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

WriteGroup = Callable[[Sequence[Any]], Awaitable[None]]


class RecordQueue:
    """Outcomes waiting for their record, and the one task that writes them."""

    def __init__(self, write_group: WriteGroup, group_size: int) -> None:
        self._write_group = write_group
        self._group_size = max(1, group_size)
        self._pending: collections.deque[Any] = collections.deque()
        self._out = 0  # items of the group whose statement is out
        self._task: asyncio.Task | None = None
        self._errors: list[BaseException] = []
        self._progress = asyncio.Event()

    @property
    def waiting(self) -> int:
        """Items posted and not yet recorded: pending, or in the statement that is out."""
        return len(self._pending) + self._out

    def post(self, item: Any) -> None:
        """Queue `item` for its record; the writing task starts if it is not running."""
        self._pending.append(item)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write_waiting())

    async def room(self) -> None:
        """Wait while a group is out and a full group waits behind it."""
        while self._out and len(self._pending) >= self._group_size:
            self._progress.clear()
            await self._progress.wait()

    async def drain(self) -> None:
        """Wait for every record posted so far; raise the first error among them."""
        while self._task is not None and not self._task.done():
            await asyncio.wait([self._task])
        self._task = None
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first

    async def _write_waiting(self) -> None:
        while self._pending:
            size = min(len(self._pending), self._group_size)
            group = [self._pending.popleft() for _ in range(size)]
            self._out = len(group)
            try:
                await self._write_group(group)
            except Exception as error:  # noqa: BLE001 - raised again by drain()
                self._errors.append(error)
            finally:
                self._out = 0
                self._progress.set()
