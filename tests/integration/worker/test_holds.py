"""Holds: the claim skips a held lane, template or recipient domain; a release sends what
waited, in its original order. A real worker and a real SMTP server, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from console.models import AuditEntry, Intent
from console.outbox import enqueue
from console.store import holds
from console.store.actions import ActionRefused
from console.transports.smtp import SmtpTransport
from console.vocabulary import EXPIRED, PENDING, SUBMITTED
from tests.support.orders import enqueue_orders
from tests.support.smtp_server import ScriptedSMTPServer


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


@pytest.fixture
def worker(make_worker, smtp_server):
    return make_worker(SmtpTransport(smtp_server.url, timeout_seconds=2))


def hold(session_factory, clock, kind, text, **options):
    with session_factory() as session:
        placed = holds.place_hold(
            session, holds.Selector.parse(kind, text), actor="ops", now=clock(),
            reason=options.pop("reason", "broken link"), **options,
        )  # fmt: skip
        session.commit()
        return placed.id


def release(session_factory, clock, hold_id, **options):
    with session_factory() as session:
        released = holds.release_hold(
            session, hold_id, actor="ops", reason="fixed", now=clock(), **options
        )
        session.commit()
        return released


def enqueue_one(session_factory, key, to, template, params):
    with session_factory() as session:
        intent_id = enqueue(session, key=key, to=to, template=template, params=params).id
        session.commit()
        return intent_id


def welcome(session_factory, to, key="welcome:1"):
    params = {"name": "Ada", "login_url": "https://example.com/login"}
    return enqueue_one(session_factory, key, to, "welcome", params)


def reset(session_factory, to, key="reset:1"):
    params = {"name": "Ada", "reset_url": "https://example.com/r/1"}
    return enqueue_one(session_factory, key, to, "password-reset", params)


def statuses(session_factory, ids):
    with session_factory() as session:
        return [session.get(Intent, intent_id).status for intent_id in ids]


def test_a_held_template_is_not_sent_while_others_are_and_release_sends_it_in_order(
    session_factory, worker, smtp_server, clock
):
    hold_id = hold(session_factory, clock, "template", "order-confirmation")
    held = [enqueue_orders(session_factory, [f"{n}@shop.example"], prefix=n)[0] for n in "abc"]
    other = welcome(session_factory, "zed@shop.example")
    assert worker.run_once().claimed == 1
    assert [m.recipient for m in smtp_server.received] == ["zed@shop.example"]
    assert statuses(session_factory, held) == [PENDING] * 3
    assert statuses(session_factory, [other]) == [SUBMITTED]

    released = release(session_factory, clock, hold_id)
    assert (released.waiting, released.expired) == (3, 0)
    assert worker.run_once().claimed == 3
    assert [m.recipient for m in smtp_server.received[1:]] == [f"{n}@shop.example" for n in "abc"]
    with session_factory() as session:
        actions = session.scalars(select(AuditEntry.action).order_by(AuditEntry.id)).all()
    assert actions == ["hold", "release"]


def test_a_held_domain_is_not_sent_to_and_its_release_sends_it(
    session_factory, worker, smtp_server, clock
):
    hold_id = hold(session_factory, clock, "domain", "Bouncy.Example")
    held = enqueue_orders(session_factory, ["a@bouncy.example", "B@BOUNCY.EXAMPLE"])
    fine = enqueue_orders(session_factory, ["c@fine.example", "d@sub.bouncy.example"], "f")
    assert worker.run_once().claimed == 2
    assert statuses(session_factory, held) == [PENDING, PENDING]
    assert statuses(session_factory, fine) == [SUBMITTED, SUBMITTED]
    release(session_factory, clock, hold_id)
    assert worker.run_once().claimed == 2
    assert statuses(session_factory, held) == [SUBMITTED, SUBMITTED]


def test_a_held_critical_lane_does_not_stop_bulk(session_factory, worker, smtp_server, clock):
    hold(session_factory, clock, "lane", "critical", reason="relay account under review")
    critical = reset(session_factory, "ada@shop.example")
    bulk = welcome(session_factory, "bob@shop.example")
    assert worker.run_once().claimed == 1
    assert statuses(session_factory, [critical, bulk]) == [PENDING, SUBMITTED]


def test_a_version_hold_stops_only_that_version(session_factory, worker, clock):
    hold(session_factory, clock, "template", "welcome@2")
    sent = welcome(session_factory, "ada@shop.example")  # version 1
    assert worker.run_once().claimed == 1
    assert statuses(session_factory, [sent]) == [SUBMITTED]


def test_held_intents_stay_held_across_a_worker_restart_and_until_the_hold_ends(
    session_factory, make_worker, smtp_server, clock
):
    until = clock() + dt.timedelta(hours=1)
    hold(session_factory, clock, "template", "welcome", until=until)
    held = welcome(session_factory, "ada@shop.example")
    for _ in range(2):  # a worker, then a new one after a restart
        worker = make_worker(SmtpTransport(smtp_server.url, timeout_seconds=2))
        assert worker.run_once().claimed == 0
        worker.close()
    clock.set(until + dt.timedelta(seconds=1))
    worker = make_worker(SmtpTransport(smtp_server.url, timeout_seconds=2))
    assert worker.run_once().claimed == 1
    assert statuses(session_factory, [held]) == [SUBMITTED]


def test_a_password_reset_held_past_its_max_age_expires_on_release_naming_the_hold(
    session_factory, worker, smtp_server, clock
):
    hold_id = hold(session_factory, clock, "template", "password-reset")
    late = reset(session_factory, "ada@shop.example")
    clock.advance(31 * 60)
    assert worker.run_once().claimed == 0
    released = release(session_factory, clock, hold_id, max_ages={"password-reset": 1800})
    assert (released.waiting, released.expired) == (0, 1)
    with session_factory() as session:
        intent = session.get(Intent, late)
        assert intent.status == EXPIRED
        assert "held (template password-reset: broken link)" in intent.status_reason
    assert worker.run_once().claimed == 0
    assert smtp_server.received == []


def test_a_second_hold_on_the_same_selector_and_a_second_release_are_refused(
    session_factory, clock
):
    hold_id = hold(session_factory, clock, "lane", "bulk")
    with pytest.raises(ActionRefused, match="already held"):
        hold(session_factory, clock, "lane", "bulk")
    release(session_factory, clock, hold_id)
    with pytest.raises(ActionRefused, match="no longer set"):
        release(session_factory, clock, hold_id)
    with pytest.raises(holds.UnknownTarget):
        holds.Selector.parse("lane", "urgent")


def test_the_list_counts_the_intents_waiting_behind_each_hold(session_factory, clock):
    hold(session_factory, clock, "domain", "bouncy.example")
    hold(session_factory, clock, "template", "welcome")
    enqueue_orders(session_factory, ["a@bouncy.example", "b@bouncy.example", "c@x.example"])
    welcome(session_factory, "d@x.example")
    with session_factory() as session:
        lines = holds.holds_in_force(session, clock())
    assert [(line.selector.notation(), line.waiting) for line in lines] == [
        ("domain bouncy.example", 2),
        ("template welcome", 1),
    ]


def test_two_workers_on_their_own_postgresql_connections_honour_the_same_hold(
    postgres_url, make_worker, smtp_server, clock
):
    import threading

    from console.store.database import make_engine, make_session_factory

    engines = [make_engine(postgres_url) for _ in range(2)]
    try:
        factories = [make_session_factory(engine) for engine in engines]
        hold(factories[0], clock, "domain", "bouncy.example")
        held = enqueue_orders(factories[0], [f"{n}@bouncy.example" for n in range(10)])
        fine = enqueue_orders(factories[1], [f"{n}@fine.example" for n in range(10)], "f")
        workers = [
            make_worker(
                SmtpTransport(smtp_server.url, timeout_seconds=2),
                session_factory=factory,
                batch_size=4,
            )  # fmt: skip
            for factory in factories
        ]

        def drain(worker):
            while worker.run_once().claimed:
                pass

        threads = [threading.Thread(target=drain, args=(worker,)) for worker in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        received = sorted(message.recipient for message in smtp_server.received)
        assert received == sorted(f"{n}@fine.example" for n in range(10)), "each once"
        assert statuses(factories[1], held) == [PENDING] * 10
        assert statuses(factories[1], fine) == [SUBMITTED] * 10
    finally:
        for engine in engines:
            engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_release_with_mail_waiting_wakes_other_processes_on_commit(
    db_url, session_factory, clock
):
    import psycopg

    from console.store.intents import NOTIFY_CHANNEL

    empty = hold(session_factory, clock, "lane", "critical")
    held = hold(session_factory, clock, "template", "welcome")
    welcome(session_factory, "ada@example.com")
    dsn = db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")

        def notifications() -> int:
            return len(list(listener.notifies(timeout=0.3, stop_after=1)))

        release(session_factory, clock, empty)
        assert notifications() == 0, "nothing waited behind it"
        with session_factory() as session:
            holds.release_hold(session, held, actor="ops", reason="fixed", now=clock())
            assert notifications() == 0, "nothing is announced before the commit"
            session.commit()
        assert notifications() == 1
