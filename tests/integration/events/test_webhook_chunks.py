"""A large signed batch is committed in bounded chunks, each idempotent: other writers get the
database between chunks, and a redelivery, whole or after a failure part-way, stores nothing
twice."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError

from console.models import ProviderEvent
from console.web import webhooks
from console.web.extensions import db
from tests.support import native_payloads as payloads
from tests.support.native_signers import native_settings, now, sendgrid_request
from tests.support.provider_fixtures import dispose, make_events_app

CHUNK = 50  # the product's chunk is larger; the rule is the same
EVENTS = 2 * CHUNK + 20


@pytest.fixture
def app(db_url, monkeypatch):
    monkeypatch.setattr(webhooks, "CHUNK_EVENTS", CHUNK)
    made, _ = make_events_app(db_url, **native_settings())
    yield made
    dispose(made)


def batch() -> list[dict]:
    base = payloads.sendgrid_batch()[0]
    return [
        {**base, "sg_event_id": f"chunk-{n}", "email": f"r{n}@example.com"} for n in range(EVENTS)
    ]


def stored(session_factory) -> int:
    with session_factory() as session:
        return session.scalar(select(func.count()).select_from(ProviderEvent))


def post(app, events, timestamp):
    body, headers = sendgrid_request(events, timestamp=timestamp)
    return app.test_client().post("/webhooks/sendgrid", data=body, headers=headers)


@pytest.fixture
def commits(session_factory):
    """What another connection sees each time the webhook's session commits."""
    seen: list[int] = []

    def after_commit(session):
        seen.append(stored(session_factory))

    event.listen(db.session, "after_commit", after_commit)
    yield seen
    event.remove(db.session, "after_commit", after_commit)


def test_each_chunk_is_committed_and_visible_to_others(app, commits):
    answer = post(app, batch(), now())
    assert answer.status_code == 200
    assert answer.get_json()["inserted"] == EVENTS
    assert commits == [CHUNK, 2 * CHUNK, EVENTS]


def test_a_redelivered_batch_stores_nothing_twice(app, session_factory):
    timestamp = int(now())
    assert post(app, batch(), str(timestamp)).status_code == 200
    again = post(app, batch(), str(timestamp + 1))
    assert again.status_code == 200
    assert again.get_json() == {"status": "recorded", "inserted": 0, "duplicates": EVENTS,
                                "matched": 0}  # fmt: skip
    assert stored(session_factory) == EVENTS


def test_after_a_failure_part_way_the_redelivery_completes_the_batch(
    app, session_factory, monkeypatch
):
    real, calls = webhooks.record_events, []

    def failing_second_chunk(session, events, **kwargs):
        calls.append(len(events))
        if len(calls) == 2:
            raise OperationalError("INSERT", {}, Exception("the database went away"))
        return real(session, events, **kwargs)

    monkeypatch.setattr(webhooks, "record_events", failing_second_chunk)
    timestamp = now()
    with pytest.raises(OperationalError):  # the test app lets the error through
        post(app, batch(), timestamp)
    assert stored(session_factory) == CHUNK
    monkeypatch.setattr(webhooks, "record_events", real)
    retried = post(app, batch(), timestamp)  # the same signed request: its key was not kept
    assert retried.status_code == 200
    assert retried.get_json()["duplicates"] == CHUNK
    assert stored(session_factory) == EVENTS
    assert post(app, batch(), timestamp).status_code == 409
