"""The worker's record queue: records in order, a group at a time, two groups at most
behind the sends, an error raised at the end of the batch without losing the rest."""

from __future__ import annotations

import asyncio

import pytest

from console.worker.record_queue import GROUP_WAIT_SECONDS, RecordQueue


class Store:
    """A write function that notes each group; answered once `answered` is set (a group
    holding 99 then fails)."""

    def __init__(self, answer_at_once: bool = True) -> None:
        self.calls: list[list] = []
        self.answered = asyncio.Event()
        if answer_at_once:
            self.answered.set()

    async def write(self, group: list) -> None:
        self.calls.append(["sent", *group])
        await self.answered.wait()
        if 99 in group:
            raise RuntimeError("the statement failed")
        self.calls.append(["answered", *group])


def sent(calls: list[list]) -> list[list]:
    return [call[1:] for call in calls if call[0] == "sent"]


def test_a_full_group_goes_at_once_and_one_not_yet_full_waits_a_moment():
    async def batch() -> list[list]:
        store = Store()
        queue = RecordQueue(store.write, group_size=3)
        for number in range(3):
            queue.post(number)
        await asyncio.sleep(0)
        assert sent(store.calls) == [[0, 1, 2]], "a full group goes at the next turn"
        queue.post(3)
        await asyncio.sleep(GROUP_WAIT_SECONDS / 2)
        assert sent(store.calls) == [[0, 1, 2]], "a group not yet full waits"
        await asyncio.sleep(GROUP_WAIT_SECONDS)
        assert sent(store.calls) == [[0, 1, 2], [3]], "then goes as it is"
        queue.post(4)
        await queue.drain()  # the end of the batch: nothing waits
        return sent(store.calls)

    assert asyncio.run(batch()) == [[0, 1, 2], [3], [4]]


def test_a_group_being_written_holds_back_the_next_until_answered():
    async def batch() -> list[list]:
        store = Store(answer_at_once=False)
        queue = RecordQueue(store.write, group_size=2)
        for number in range(4):
            queue.post(number)
        for _ in range(5):
            await asyncio.sleep(0)
        assert store.calls == [["sent", 0, 1]], "nothing after it goes before its answer"
        assert queue.waiting == 4
        store.answered.set()
        await queue.drain()
        assert queue.waiting == 0
        return store.calls

    calls = asyncio.run(batch())
    assert calls == [["sent", 0, 1], ["answered", 0, 1], ["sent", 2, 3], ["answered", 2, 3]]


def test_behind_a_group_being_written_a_full_group_makes_the_senders_wait():
    async def batch() -> None:
        store = Store(answer_at_once=False)
        queue = RecordQueue(store.write, group_size=2)
        queue.post(0)
        queue.post(1)
        await asyncio.sleep(0)
        await asyncio.wait_for(queue.room(), 1)  # one group out, none behind it: room
        queue.post(2)
        queue.post(3)
        waiting = asyncio.ensure_future(queue.room())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done(), "a full group behind the one out: no room"
        store.answered.set()
        await asyncio.wait_for(waiting, 1)
        assert ["sent", 2, 3] in store.calls, "the group behind went out, making room"
        await queue.drain()

    asyncio.run(batch())


def test_a_failed_group_is_raised_by_drain_and_the_records_after_it_still_go():
    async def batch() -> list[list]:
        store = Store()
        queue = RecordQueue(store.write, group_size=1)
        for number in (1, 99, 2):
            queue.post(number)
        with pytest.raises(RuntimeError, match="failed"):
            await queue.drain()
        queue.post(3)
        await queue.drain()  # the error was raised once
        return store.calls

    calls = asyncio.run(batch())
    assert [call for call in calls if call[0] == "answered"] == [
        ["answered", 1],
        ["answered", 2],
        ["answered", 3],
    ]


def test_a_group_of_one_writes_each_alone_in_order():
    async def batch() -> list[list]:
        store = Store()
        queue = RecordQueue(store.write, group_size=1)
        for number in range(3):
            queue.post(number)
        await queue.drain()
        return sent(store.calls)

    assert asyncio.run(batch()) == [[0], [1], [2]]
