"""Records written together: up to a batch of them in one write, each caller answered with
its own record's result, a failed write raised to each of its callers."""

from __future__ import annotations

import asyncio

import pytest

from console.engine.record_batches import RecordBatches


class Writes:
    """A write of a batch that records every value but `refused`, and keeps each batch."""

    def __init__(self, refused=(), error: Exception | None = None) -> None:
        self.batches: list[list[int]] = []
        self.refused = set(refused)
        self.error = error

    async def __call__(self, batch):
        self.batches.append([values["n"] for values in batch])
        if self.error is not None:
            raise self.error
        return [values["n"] not in self.refused for values in batch]


def record_all(batches: RecordBatches, count: int):
    async def run():
        return await asyncio.gather(*(batches.record({"n": n}) for n in range(count)))

    return asyncio.run(run())


def test_records_arriving_together_go_in_batches_of_the_size_each_with_its_answer():
    writes = Writes(refused={2, 5})
    answers = record_all(RecordBatches(writes, size=4), 6)
    assert answers == [True, True, False, True, True, False]
    assert writes.batches == [[0, 1, 2, 3], [4, 5]]


def test_a_failed_write_is_raised_to_each_record_of_its_batch():
    writes = Writes(error=RuntimeError("database gone"))

    async def run():
        batches = RecordBatches(writes, size=2)
        return await asyncio.gather(
            *(batches.record({"n": n}) for n in range(3)), return_exceptions=True
        )

    answers = asyncio.run(run())
    assert [type(answer) for answer in answers] == [RuntimeError] * 3
    assert writes.batches == [[0, 1], [2]]


@pytest.mark.parametrize("size", [1, 3])
def test_a_record_alone_is_written_without_waiting_for_a_full_batch_forever(size):
    writes = Writes()
    assert record_all(RecordBatches(writes, size=size), 1) == [True]
    assert writes.batches == [[0]]
