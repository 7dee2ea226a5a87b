"""Per-domain back-off against a real SMTP server (aiosmtpd), on SQLite and PostgreSQL.

A domain backs off on throttling replies only: a message's own 4yz is its retry, and
greylisting, which refuses each message's first try, never starves the domain.
"""

from __future__ import annotations

import collections
import datetime as dt

import pytest
from sqlalchemy import func, select, update

from console.config import load_settings
from console.core.backoff import Backoff
from console.models import Attempt, Intent
from console.state_tables import DomainDeferral
from console.store import claims
from console.transports.smtp import SmtpTransport
from console.vocabulary import PENDING, SUBMITTED
from console.worker.guard import GuardPolicy
from tests.support.claim_steps import in_claim
from tests.support.orders import enqueue_orders
from tests.support.smtp_server import ScriptedSMTPServer

TEMPORARY_FAILURE = "451 4.3.0 Temporary failure"
RATE_LIMITED = "rcpt:451 4.7.1 Rate limited, slow down"
GREYLISTED = "rcpt:451 4.7.1 Greylisted, please try again later"
# a domain refusing every message's first try with a throttling reply
FIRST_TRY_THROTTLED = "rcpt:451 4.7.1 Too many messages, try again later"
MAX_TICKS = 400
ONE_SECOND = dt.timedelta(seconds=1)
THREE_RETRY_INTERVALS = 15 * ONE_SECOND


@pytest.fixture
def smtp_server():
    with ScriptedSMTPServer() as server:
        yield server


def settings_of(tmp_path, **variables):
    """Settings as `console worker` reads them, with small retry and back-off times."""
    environ = {f"CONSOLE_{name.upper()}": str(value) for name, value in variables.items()}
    return load_settings(environ, instance_path=tmp_path)


@pytest.fixture
def worker_with(make_worker, smtp_server, tmp_path):
    def build(batch_size=50, **variables):
        settings = settings_of(tmp_path, **variables)
        backoff = Backoff(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_floor_seconds
        )
        return make_worker(
            SmtpTransport(smtp_server.url, timeout_seconds=2),
            backoff=backoff,
            max_attempts=50,
            batch_size=batch_size,
            guard_policy=GuardPolicy.from_settings(settings),
        )

    return build


def statuses(session_factory, ids) -> collections.Counter[str]:
    with session_factory() as session:
        found = session.scalars(select(Intent.status).where(Intent.id.in_(ids)))
        return collections.Counter(found)


def attempts_of(session_factory, ids) -> int:
    with session_factory() as session:
        query = select(func.count()).select_from(Attempt).where(Attempt.intent_id.in_(ids))
        return session.scalar(query)


def deferral_of(session_factory, domain: str) -> DomainDeferral | None:
    with session_factory() as session:
        return session.get(DomainDeferral, domain)


def drain(worker) -> None:
    """Tick until a tick claims nothing."""
    for _ in range(MAX_TICKS):
        if not worker.run_once().claimed:
            return
    raise AssertionError("the worker kept claiming")


def stamp(session_factory, intent_id: int, now) -> None:
    """Make an intent enqueued now by the test's clock (enqueue stamps the real time)."""
    with session_factory() as session:
        session.execute(
            update(Intent)
            .where(Intent.id == intent_id)
            .values(created_at=now, next_attempt_at=now, updated_at=now)
        )
        session.commit()


def test_temporary_failures_after_data_defer_nothing(
    session_factory, worker_with, smtp_server, clock
):
    failing = [f"f{n}@example.com" for n in range(4)]
    others = [f"o{n}@example.com" for n in range(3)]
    for address in failing:
        smtp_server.script.set(address, [TEMPORARY_FAILURE, "250"])
    failing_ids = enqueue_orders(session_factory, failing, prefix="failing")
    other_ids = enqueue_orders(session_factory, others, prefix="other")
    worker = worker_with(retry_base_seconds=2, retry_cap_seconds=2, retry_floor_seconds=2)
    assert worker.run_once().claimed == 7
    assert deferral_of(session_factory, "example.com") is None
    assert statuses(session_factory, other_ids) == {SUBMITTED: 3}, "the domain still takes mail"
    assert statuses(session_factory, failing_ids) == {PENDING: 4}
    clock.advance(2)
    drain(worker)
    assert statuses(session_factory, failing_ids) == {SUBMITTED: 4}
    assert [r.result for r in smtp_server.received].count("451") == 4


def test_rate_limiting_at_rcpt_defers_the_domain_and_holds_new_mail(
    session_factory, worker_with, smtp_server, clock
):
    limited = [f"r{n}@rate.example" for n in range(10)]
    for address in limited:
        smtp_server.script.set(address, [RATE_LIMITED])
    limited_ids = enqueue_orders(session_factory, limited, prefix="limited")
    worker = worker_with(
        retry_base_seconds=1,
        retry_cap_seconds=1,
        retry_floor_seconds=1,
        domain_backoff_seconds=600,
    )
    for _ in range(30):  # half a minute, a tick a second: thirty retry intervals
        drain(worker)
        clock.advance(1)
    deferral = deferral_of(session_factory, "rate.example")
    assert deferral is not None and deferral.reply_code == 451
    assert 3 <= attempts_of(session_factory, limited_ids) <= 4, "tried after the deferral"
    [late_id] = enqueue_orders(session_factory, ["late@rate.example"], prefix="late")
    [other_id] = enqueue_orders(session_factory, ["bob@fine.example"], prefix="fine")
    for _ in range(5):
        drain(worker)
        clock.advance(1)
    assert statuses(session_factory, [late_id]) == {PENDING: 1}
    assert attempts_of(session_factory, [late_id]) == 0, "a new enqueue waits for the deferral"
    assert statuses(session_factory, [other_id]) == {SUBMITTED: 1}


def test_a_greylisting_relay_gets_every_message_within_three_retry_intervals(
    session_factory, worker_with, smtp_server, clock
):
    addresses = [f"g{n}@grey.example" for n in range(60)]
    for address in addresses:
        smtp_server.script.set(address, [GREYLISTED, "250"])
    ids = enqueue_orders(session_factory, addresses, prefix="grey")
    worker = worker_with(retry_base_seconds=5, retry_cap_seconds=5, retry_floor_seconds=5)
    started = clock()
    while (
        statuses(session_factory, ids)[SUBMITTED] < 60
        and clock() - started <= THREE_RETRY_INTERVALS
    ):
        drain(worker)
        clock.advance(1)
    assert statuses(session_factory, ids) == {SUBMITTED: 60}
    assert deferral_of(session_factory, "grey.example") is None


def test_a_domain_refusing_each_first_try_delivers_its_oldest_mail_first(
    session_factory, worker_with, smtp_server, clock
):
    """New mail keeps coming; each deferral's end lets the longest-waiting intents go."""
    smtp_server.script.set("*", [FIRST_TRY_THROTTLED, "250"])
    waiting = enqueue_orders(session_factory, [f"w{n}@busy.example" for n in range(12)])
    worker = worker_with(
        retry_base_seconds=2,
        retry_cap_seconds=2,
        retry_floor_seconds=2,
        domain_backoff_seconds=10,
    )
    for second in range(60):  # a new intent a second: ten a deferral, a run needs three
        [new_id] = enqueue_orders(session_factory, [f"n{second}@busy.example"], f"n{second}")
        stamp(session_factory, new_id, clock())
        drain(worker)
        clock.advance(1)
    assert deferral_of(session_factory, "busy.example") is not None, "the domain backed off"
    assert statuses(session_factory, waiting) == {SUBMITTED: 12}


def test_the_claim_takes_retries_first_then_first_attempts_by_when_they_became_due(
    session_factory, session, clock
):
    now = clock()
    addresses = [f"{name}@busy.example" for name in ("held", "new", "late", "early")]
    held, new, retry_late, retry_early = enqueue_orders(session_factory, addresses)
    at = {
        held: (now - 60 * ONE_SECOND, now - 60 * ONE_SECOND, 0),  # held back: keeps its place
        new: (now - 30 * ONE_SECOND, now - 30 * ONE_SECOND, 0),  # enqueued during it
        retry_late: (now - 90 * ONE_SECOND, now - 5 * ONE_SECOND, 1),
        retry_early: (now - 20 * ONE_SECOND, now - 10 * ONE_SECOND, 2),
    }
    for intent_id, (created_at, due, attempts) in at.items():
        session.execute(
            update(Intent)
            .where(Intent.id == intent_id)
            .values(created_at=created_at, next_attempt_at=due, attempt_count=attempts)
        )
    session.commit()
    limits = claims.lane_limits_within(10, None)
    due = in_claim(session, lambda steps: steps.lock_due(now, 10, limits))
    assert [intent.id for intent in due] == [retry_early, retry_late, held, new]
