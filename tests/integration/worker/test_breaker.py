"""The lane circuit breaker: trip on a failure rate, pause, probe, close or reopen longer."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core import breaker
from console.core.breaker import NORMAL, PAUSED, PROBE, BreakerPolicy, BreakerState, FailureWindow
from console.store.send_guards import read_breakers
from console.vocabulary import CLOSED, HALF_OPEN, OPEN
from console.worker.guard import GuardPolicy, SendGuard
from tests.support.claim_steps import in_claim, on_engine

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
POLICY = BreakerPolicy(window_attempts=10, failure_rate=0.5, open_seconds=30, max_open_seconds=100)


def window_of(*outcomes: str, size: int = 10) -> FailureWindow:
    window = FailureWindow(size)
    for outcome in outcomes:
        window.record(outcome)
    return window


def seconds(after: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=after)


@pytest.mark.parametrize(
    "outcomes, trips",
    [
        ([], False),
        (["transient"] * 4, False),  # fewer than half a window: not enough to judge
        (["transient"] * 5, True),
        (["accepted"] * 5 + ["transient"] * 4, False),  # 4/9 below 0.5
        (["accepted"] * 5 + ["transient"] * 5, True),  # 5/10 reaches 0.5
        (["transient"] * 5 + ["accepted"] * 10, False),  # old failures left the window
        (["permanent"] * 3 + ["ambiguous"] * 3, True),  # anything not accepted counts
        (["accepted"] * 4 + ["transient"] + ["accepted"] * 4 + ["permanent"], False),
    ],
)
def test_trip_threshold(outcomes, trips):
    opened = breaker.should_trip(BreakerState(), window_of(*outcomes), POLICY, T0)
    assert (opened is not None) == trips
    if opened:
        assert opened.state == OPEN and opened.trips == 1
        assert opened.resume_at == seconds(30) and opened.opened_at == T0


def test_a_normal_mix_of_4yz_and_5yz_never_trips_the_default_breaker():
    policy = BreakerPolicy()  # 50 attempts, 0.5
    window = FailureWindow(policy.window_attempts)
    for number in range(10_000):
        outcome = "transient" if number % 20 == 0 else "accepted"
        window.record("permanent" if number % 100 == 1 else outcome)
        assert breaker.should_trip(BreakerState(), window, policy, T0) is None


@pytest.mark.parametrize(
    "outcome, code, failure",
    [
        ("accepted", 250, False),
        ("transient", None, True),  # refused connection, DNS, TLS, timeout before DATA
        ("ambiguous", None, True),
        ("transient", 421, True),  # the relay closes the channel
        ("permanent", 535, True),  # our credentials
        ("permanent", 554, True),  # a blanket refusal
        ("transient", 503, True),  # an HTTP provider's outage
        ("permanent", 401, True),
        ("transient", 451, False),  # one mailbox busy or greylisting: domain back-off's job
        ("transient", 452, False),
        ("permanent", 550, False),  # one unknown mailbox
        ("permanent", 422, False),  # one request the provider judged invalid
    ],
)
def test_what_counts_against_the_provider(outcome, code, failure):
    assert breaker.is_provider_failure(outcome, code) is failure


def test_refusals_of_single_recipients_never_trip_the_breaker():
    window = FailureWindow(10)
    for code in (451, 550, 452, 553) * 5:
        window.record("transient" if code < 500 else "permanent", code)
    assert breaker.should_trip(BreakerState(), window, POLICY, T0) is None


def test_a_probe_answered_with_a_recipient_refusal_closes_the_breaker():
    probing = BreakerState(HALF_OPEN, trips=1, resume_at=seconds(150))
    assert breaker.after_probe(probing, "transient", POLICY, T0, code=451).state == CLOSED
    assert breaker.after_probe(probing, "transient", POLICY, T0, code=421).state == OPEN


def test_an_open_breaker_does_not_trip_again():
    state = BreakerState(OPEN, trips=1, resume_at=seconds(30))
    assert breaker.should_trip(state, window_of(*["transient"] * 10), POLICY, T0) is None


@pytest.mark.parametrize(
    "state, at, mode",
    [
        (BreakerState(), 0, NORMAL),
        (BreakerState(OPEN, 1, resume_at=seconds(30)), 29.9, PAUSED),
        (BreakerState(OPEN, 1, resume_at=seconds(30)), 30, PROBE),
        (BreakerState(HALF_OPEN, 1, resume_at=seconds(150)), 100, PAUSED),  # a probe is out
        (BreakerState(HALF_OPEN, 1, resume_at=seconds(150)), 150, PROBE),  # it never reported
    ],
)
def test_claim_mode(state, at, mode):
    assert breaker.claim_mode(state, seconds(at)) == mode


def test_a_probe_closes_or_reopens_for_longer_up_to_the_cap():
    state = breaker.should_trip(BreakerState(), window_of(*["transient"] * 10), POLICY, T0)
    pauses = []
    now = T0
    for _ in range(4):
        now = state.resume_at
        probing = breaker.start_probe(state, POLICY, now)
        assert probing.state == HALF_OPEN and breaker.claim_mode(probing, now) == PAUSED
        state = breaker.after_probe(probing, "transient", POLICY, now)
        assert state.state == OPEN
        pauses.append((state.resume_at - now).total_seconds())
    assert pauses == [60, 100, 100, 100]  # 30 s doubled per trip, capped at 100 s
    closed = breaker.after_probe(breaker.start_probe(state, POLICY, now), "accepted", POLICY, now)
    assert closed == BreakerState(CLOSED, trips=0, failure_rate=0.0)
    assert breaker.claim_mode(closed, now) == NORMAL


def test_window_keeps_only_the_last_outcomes():
    window = window_of("transient", "transient", "accepted", size=2)
    assert len(window) == 2 and window.rate() == 0.5
    window.clear()
    assert len(window) == 0 and window.rate() == 0.0


# --- shared state: several workers on one database -------------------------------------

GUARD_POLICY = GuardPolicy(breaker=POLICY)


async def feed(guard, engine, lane="bulk", count=10, outcome="transient", now=T0, reached=True):
    """Feed `count` recorded outcomes to `guard` as the worker does: the writes they call
    for committed by `engine`."""
    for _ in range(count):
        await guard.after_outcome(
            engine, lane=lane, outcome=outcome, code=None, reached_transport=reached, now=now
        )


def fail(guard, session, **outcomes):
    """`feed` on the engine of the database `session` is on."""
    on_engine(session.get_bind(), lambda engine: feed(guard, engine, **outcomes))


def lane_limits(guard, session, now, batch_size=50):
    """What `guard` lets a claim at `now` take from each lane, in a claim of its own."""
    return in_claim(session, lambda steps: guard.lane_limits(steps, now, batch_size))


def stored_breakers(session):
    """Every lane's breaker as stored now."""
    session.rollback()  # a fresh read
    return read_breakers(session)


def test_one_worker_trips_the_breaker_and_every_worker_pauses_the_lane(session_factory):
    first, second = (
        SendGuard(GUARD_POLICY, "w1"),
        SendGuard(GUARD_POLICY, "w2"),
    )
    with session_factory() as session:
        assert lane_limits(first, session, T0) == {"critical": 50, "bulk": 50}
        assert lane_limits(second, session, T0) == {"critical": 50, "bulk": 50}
        fail(first, session, count=4)
        assert stored_breakers(session)["bulk"].state == CLOSED
        fail(first, session, count=1)
        state = stored_breakers(session)["bulk"]
        assert state.state == OPEN and state.failure_rate == 1.0
        assert lane_limits(second, session, seconds(1)) == {"critical": 50, "bulk": 0}
        fail(second, session, count=10, now=seconds(1))  # in-flight sends of a paused lane
        assert stored_breakers(session)["bulk"].trips == 1


def test_a_breaker_this_worker_opens_while_it_reads_the_breakers_pauses_that_claim(
    session_factory,
):
    """A claim during a batch awaits its read of the breakers while the worker's records
    go on: a lane one of them pauses meanwhile is paused for that claim too."""
    guard = SendGuard(GUARD_POLICY, "w1")

    async def claim_while_a_record_trips(engine):
        async with engine.claiming() as steps:
            read = steps.read_breakers

            async def read_while_a_record_trips():
                found = await read()  # the stored states, all closed
                await feed(guard, engine, count=5)  # meanwhile, a record of this worker trips
                return found

            steps.read_breakers = read_while_a_record_trips
            return await guard.lane_limits(steps, seconds(1), 50)

    with session_factory() as session:
        assert lane_limits(guard, session, T0) == {"critical": 50, "bulk": 50}
        limits = on_engine(session.get_bind(), claim_while_a_record_trips)
        assert limits == {"critical": 50, "bulk": 0}
        assert guard.states["bulk"].state == OPEN


def test_render_failures_do_not_count_towards_the_breaker(session_factory):
    guard = SendGuard(GUARD_POLICY, "w1")
    with session_factory() as session:
        lane_limits(guard, session, T0)
        fail(guard, session, count=10, outcome="permanent", reached=False)
        assert stored_breakers(session)["bulk"].state == CLOSED


def test_exactly_one_worker_probes_and_its_answer_closes_or_reopens(session_factory):
    guards = [SendGuard(GUARD_POLICY, f"w{n}") for n in range(3)]
    with session_factory() as session:
        for guard in guards:
            lane_limits(guard, session, T0)
        fail(guards[0], session)
        resume = seconds(30)
        limits = [lane_limits(guard, session, resume)["bulk"] for guard in guards]
        assert sorted(limits) == [0, 0, 1]
        prober = guards[limits.index(1)]
        assert stored_breakers(session)["bulk"].state == HALF_OPEN
        fail(prober, session, count=1, now=resume)  # the probe fails: open for longer
        reopened = stored_breakers(session)["bulk"]
        assert reopened.state == OPEN and reopened.trips == 2
        assert reopened.resume_at == resume + dt.timedelta(seconds=60)

        later = reopened.resume_at
        limits = [lane_limits(guard, session, later)["bulk"] for guard in guards]
        prober = guards[limits.index(1)]
        fail(prober, session, count=1, outcome="accepted", now=later)
        assert stored_breakers(session)["bulk"] == BreakerState(CLOSED, 0, 0.0)
        for guard in guards:
            assert lane_limits(guard, session, later)["bulk"] == 50
            assert len(guard.windows["bulk"]) == 0


def test_an_unused_probe_lets_the_next_tick_try_again(session_factory):
    guard = SendGuard(GUARD_POLICY, "w1")
    with session_factory() as session:
        lane_limits(guard, session, T0)
        fail(guard, session)
        assert lane_limits(guard, session, seconds(30))["bulk"] == 1
        on_engine(session.get_bind(), lambda e: guard.probe_unused(e, "bulk", seconds(30)))
        state = stored_breakers(session)["bulk"]
        assert state.state == OPEN and state.resume_at == seconds(30) and state.trips == 1
        assert lane_limits(guard, session, seconds(31))["bulk"] == 1


def test_a_silent_prober_is_given_up_after_the_probe_timeout(session_factory):
    silent, other = (
        SendGuard(GUARD_POLICY, "w1"),
        SendGuard(GUARD_POLICY, "w2"),
    )
    with session_factory() as session:
        lane_limits(silent, session, T0)
        fail(silent, session)
        assert lane_limits(silent, session, seconds(30))["bulk"] == 1  # then it dies
        assert lane_limits(other, session, seconds(100))["bulk"] == 0
        timeout = 30 + POLICY.probe_timeout_seconds
        assert lane_limits(other, session, seconds(timeout))["bulk"] == 1


# --- the real worker against a real SMTP server ------------------------------------------


@pytest.fixture
def smtp_server():
    from tests.support.smtp_server import ScriptedSMTPServer

    with ScriptedSMTPServer(script={"*": ["421"]}) as server:
        yield server


def test_the_worker_pauses_a_failing_lane_probes_and_resumes(
    session_factory, smtp_server, make_worker, clock
):
    from sqlalchemy import func, select

    from console.core.backoff import Backoff
    from console.models import Intent
    from console.outbox import enqueue
    from console.transports.smtp import SmtpTransport

    worker = make_worker(
        SmtpTransport(smtp_server.url, timeout_seconds=2),
        random=0.0,
        backoff=Backoff(1, 1, 0),
        max_attempts=100,
        batch_size=4,
        lease_seconds=60,
        guard_policy=GuardPolicy(breaker=POLICY),
    )
    with session_factory() as session:
        for number in range(12):
            enqueue(
                session,
                key=f"welcome-{number}",
                to=f"user@d{number}.example.com",  # one domain each: no domain back-off
                template="welcome",
                params={"name": "A", "login_url": "u"},
            )
        session.commit()
    claimed = [worker.run_once().claimed for _ in range(2)]  # 8 x 421: 5 trip it
    assert claimed == [4, 4]
    with session_factory() as session:
        assert stored_breakers(session)["bulk"].state == OPEN
    clock.advance(5)  # the intents are due again, the lane is paused
    assert worker.run_once().claimed == 0
    received_while_paused = len(smtp_server.received)

    smtp_server.script.set("*", ["250"])
    clock.advance(POLICY.open_seconds)
    assert worker.run_once().claimed == 1  # the probe, accepted
    with session_factory() as session:
        assert stored_breakers(session)["bulk"].state == CLOSED
    for _ in range(4):
        worker.run_once()
    with session_factory() as session:
        statuses = dict(
            session.execute(select(Intent.status, func.count()).group_by(Intent.status)).all()
        )
    assert statuses == {"submitted": 12}
    assert received_while_paused == 8


def test_the_dashboard_says_a_lane_is_paused_and_until_when(app, console_client):
    from console.models import utcnow
    from console.state_tables import LaneBreaker
    from console.web.extensions import db

    client = console_client("viewer")
    assert "paused" not in client.get("/").get_data(as_text=True)
    resume_at = utcnow() + dt.timedelta(seconds=60)
    with app.app_context():
        db.session.add(
            LaneBreaker(lane="bulk", state="open", trips=1, failure_rate=0.8, resume_at=resume_at)
        )
        db.session.commit()
    page = client.get("/").get_data(as_text=True)
    assert "The bulk lane is paused by its circuit breaker: 80% of recent attempts failed" in page
    assert f"a probe goes at {resume_at:%H:%M:%S} UTC" in page
    assert "critical lane is paused" not in page
