"""The T2 records of one worker, written in order behind the sends.

A sender posts its outcome and goes on to the next email; one writer task awaits the
records on the send store, a group at a time (up to the store's ``group_size``, waiting
``GROUP_WAIT_SECONDS`` at most for a group to fill), so a record's round trip overlaps
the next send instead of holding it. Outcomes never pile up beyond a group being written
and a full group behind it (``room``): that is all a kill can leave unrecorded beyond the
sends in flight. An error is kept for ``drain``; the records after it are still written.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Any

# How long a record waits for others to go with it in one statement.
GROUP_WAIT_SECONDS = 0.01


class RecordQueue:
    """Items posted by the senders, handed to `write_group` in order, a group at a time."""

    def __init__(self, write_group: Callable[[list[Any]], Awaitable[None]], group_size: int):
        self._write_group = write_group
        self._group_size = max(1, group_size)
        self._pending: collections.deque[Any] = collections.deque()
        self._writer: asyncio.Task | None = None
        self._in_write = 0  # items of the group being written
        self._filled: asyncio.Future | None = None  # the writer waits for a group to fill
        self._written: asyncio.Future | None = None  # senders wait for room
        self._draining = False
        self._errors: list[BaseException] = []

    @property
    def waiting(self) -> int:
        """Items posted and not yet written: pending, or in the group being written."""
        return len(self._pending) + self._in_write

    def post(self, item: Any) -> None:
        """Queue `item`; the writer task takes it in its turn."""
        self._pending.append(item)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_all())
        elif self._filled is not None and len(self._pending) >= self._group_size:
            _resolve(self._filled)

    async def room(self) -> None:
        """Wait while a group is written and a full group waits behind it."""
        while self._in_write and len(self._pending) >= self._group_size:
            if self._written is None:
                self._written = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._written)

    async def drain(self) -> None:
        """Wait until every item posted so far is written; raise the first error."""
        self._draining = True
        try:
            while self._writer is not None:
                if self._filled is not None:
                    _resolve(self._filled)
                await asyncio.shield(self._writer)
        finally:
            self._draining = False
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first

    async def _write_all(self) -> None:
        try:
            while self._pending:
                if len(self._pending) < self._group_size and not self._draining:
                    await self._wait_for_more()
                group = [self._pending.popleft() for _ in range(self._next_group_size())]
                self._in_write = len(group)
                try:
                    await self._write_group(group)
                except Exception as error:  # noqa: BLE001 - raised again by drain()
                    self._errors.append(error)
                finally:
                    self._in_write = 0
                    if self._written is not None:
                        _resolve(self._written)
                        self._written = None
        finally:
            self._writer = None

    def _next_group_size(self) -> int:
        return min(self._group_size, len(self._pending))

    async def _wait_for_more(self) -> None:
        """A group not yet full goes ``GROUP_WAIT_SECONDS`` from now, unless filled first."""
        self._filled = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait([self._filled], timeout=GROUP_WAIT_SECONDS)
        finally:
            self._filled = None


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
