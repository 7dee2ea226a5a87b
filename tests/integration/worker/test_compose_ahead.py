"""The next email of a batch is composed while the relay reads the body before it.

Each email is still rendered once; one that fails to compose fails in its own turn,
exactly as it did when it was composed there.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from console.mail.catalog import default_catalog
from console.mail.template_settings import TemplateError
from console.models import Intent
from console.transports.memory import MemoryTransport
from console.vocabulary import DATA_SENT, FAILED, SUBMITTED
from tests.support.orders import enqueue_orders


class CountingCatalog:
    """The product's catalog, counting renders; the recipients in `broken` fail to render."""

    def __init__(self, broken: dict[str, Exception] | None = None) -> None:
        self._catalog = default_catalog()
        self.broken = broken or {}
        self.rendered: list[str] = []  # the order number of each render, in order

    def render(self, name, version, params):
        number = params["order_number"]
        self.rendered.append(number)
        if number in self.broken:
            raise self.broken[number]
        return self._catalog.render(name, version, params)

    def __getattr__(self, name):
        return getattr(self._catalog, name)


class RelayThatReads(MemoryTransport):
    """A memory transport whose relay takes a moment to read each body, as a real one does:
    it notes how many emails were rendered by the time each body is read."""

    def __init__(self, catalog: CountingCatalog) -> None:
        super().__init__()
        self._catalog = catalog
        self.rendered_when_read: list[int] = []

    async def send(self, email, on_stage):
        async def stage_then_read(sent_email, stage):
            await on_stage(sent_email, stage)
            if stage == DATA_SENT:
                await asyncio.sleep(0)  # the body in flight: the event loop waits
                self.rendered_when_read.append(len(self._catalog.rendered))

        return await super().send(email, stage_then_read)


def enqueue_numbered_orders(session_factory, count: int) -> list[int]:
    ids = enqueue_orders(session_factory, [f"buyer{n}@example.com" for n in range(count)])
    with session_factory() as session:  # order numbers 0..count-1, to tell renders apart
        for number, intent_id in enumerate(ids):
            intent = session.get(Intent, intent_id)
            intent.params = {**intent.params, "order_number": str(number)}
        session.commit()
    return ids


def test_the_next_email_is_rendered_while_the_body_before_it_is_read(session_factory, make_worker):
    catalog = CountingCatalog()
    transport = RelayThatReads(catalog)
    enqueue_numbered_orders(session_factory, 3)
    report = make_worker(transport, catalog=catalog).run_once()
    assert report.statuses[SUBMITTED] == 3
    # while the first body is read the second email is ready, and so on; none twice
    assert transport.rendered_when_read == [2, 3, 3]
    assert catalog.rendered == ["0", "1", "2"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_an_email_that_cannot_be_rendered_ahead_fails_in_its_own_turn(
    session_factory, make_worker, concurrency
):
    catalog = CountingCatalog(broken={"1": TemplateError("no such variable: total")})
    transport = RelayThatReads(catalog)
    ids = enqueue_numbered_orders(session_factory, 3)
    make_worker(transport, catalog=catalog, concurrency=concurrency).run_once()
    with session_factory() as session:
        statuses = {i: session.get(Intent, i).status for i in ids}
        reasons = session.scalars(select(Intent.status_reason).where(Intent.id == ids[1])).one()
    assert statuses == {ids[0]: SUBMITTED, ids[1]: FAILED, ids[2]: SUBMITTED}
    assert "no such variable" in reasons
    assert sorted(e.recipient for e in transport.sent) == [
        "buyer0@example.com",
        "buyer2@example.com",
    ]


def test_an_unexpected_error_ahead_is_raised_in_its_own_turn_after_the_email_before_it(
    session_factory, make_worker
):
    catalog = CountingCatalog(broken={"1": RuntimeError("a bug in a filter")})
    transport = RelayThatReads(catalog)
    ids = enqueue_numbered_orders(session_factory, 2)
    worker = make_worker(transport, catalog=catalog)
    with pytest.raises(RuntimeError, match="a bug in a filter"):
        worker.run_once()
    with session_factory() as session:
        assert session.get(Intent, ids[0]).status == SUBMITTED  # recorded before the error
    assert catalog.rendered == ["0", "1", "1"]  # tried ahead, then again in its turn
