"""The grouped records on PostgreSQL's socket (next door): the same rows the driver's
``record_all`` writes, whatever the reply text holds, each still the compare-and-set of
its own lease; committed when ``record_all`` returns."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from console.store import records
from console.store.pg_socket import SocketRecords
from console.vocabulary import CLAIMED, SENDING, SUBMITTED
from tests.support.claim_steps import T0, lease_all, load, lock, queue, seconds
from tests.support.record_checks import outcomes_of_each_kind, row_values

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

AWKWARD_TEXTS = [
    'quoted "word", a comma, {braces}',
    'a backslash \\ and \\" both',
    "NULL",
    "",
    "ünïcødé ✓ and a tab\there",
]


def on_the_socket(engine, values) -> set[int]:
    connection = records.writer(engine)
    try:
        return asyncio.run(SocketRecords(connection).record_all(values))
    finally:
        connection.close()


def test_the_socket_writes_what_the_driver_writes_for_any_text(engine, session_factory, session):
    kinds = outcomes_of_each_kind(T0 + seconds(3))
    kinds += [
        (dataclasses.replace(kinds[1][0], reply_text=text), *kinds[1][1:]) for text in AWKWARD_TEXTS
    ]
    for _ in range(2 * len(kinds)):
        queue(session_factory)
    held = lease_all(session, lock(session))
    session.commit()
    by_driver, by_socket = held[: len(kinds)], held[len(kinds) :]
    now = T0 + seconds(3)

    def values(claims):
        return [
            records.record_values(claim, *kind, now)
            for claim, kind in zip(claims, kinds, strict=True)
        ]

    connection = records.writer(engine)
    try:
        assert records.record_all(connection, values(by_driver))
    finally:
        connection.close()
    recorded = on_the_socket(engine, values(by_socket))

    assert recorded == {claim.attempt_id for claim in by_socket}
    for one, other in zip(by_driver, by_socket, strict=True):
        assert row_values(session_factory, one.intent.id) == row_values(
            session_factory, other.intent.id
        )
    assert load(session_factory, by_socket[-1].intent.id)[1][0].reply_text == AWKWARD_TEXTS[-1]


def test_a_record_whose_lease_was_taken_is_left_as_it_is(engine, session_factory, session):
    intent_ids = [queue(session_factory) for _ in range(3)]
    held = lease_all(session, lock(session))
    session.commit()
    swept = dataclasses.replace(held[1], lease_token="a-lease-swept-meanwhile")
    result, classification, decision = outcomes_of_each_kind(T0)[0]
    values = [
        records.record_values(claim, result, classification, decision, T0)
        for claim in (held[0], swept, held[2])
    ]

    recorded = on_the_socket(engine, values)

    assert recorded == {held[0].attempt_id, held[2].attempt_id}
    assert on_the_socket(engine, values) == set(), "recorded once"
    intent, [attempt] = load(session_factory, intent_ids[1])
    assert (intent.status, intent.lease_token) == (SENDING, held[1].lease_token)
    assert (attempt.stage, attempt.finished_at) == (CLAIMED, None)
    assert load(session_factory, intent_ids[0])[0].status == SUBMITTED
