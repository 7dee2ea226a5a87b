"""Per-domain back-off: a run of throttling replies from one domain defers it, longer on
each run; a message's own 4yz neither counts nor ends the run."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core.classify import enhanced_status_of
from console.core.domain_backoff import (
    DomainBackoffPolicy,
    DomainRuns,
    is_domain_throttle,
    recipient_domain,
)
from console.core.send_result import SendResult
from console.core.throttle_signals import Reply
from console.vocabulary import ENVELOPE

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
POLICY = DomainBackoffPolicy(run_length=3, base_seconds=60, cap_seconds=200)


def reply(line: str | None) -> Reply | None:
    """A reply line such as ``"451 4.7.1 Rate limited"`` as a refusal at RCPT; None stays."""
    if line is None:
        return None
    code, _, text = line.partition(" ")
    return Reply(int(code), enhanced_status_of(text), text, "RCPT")


def feed(runs: DomainRuns, domain: str, *replies: tuple[str, str | None]):
    return [runs.record(domain, outcome, reply(line), T0) for outcome, line in replies]


FOUR_XX = ("transient", "421 4.7.0 try later")
MAILBOX_FULL = ("transient", "452 4.2.2 Mailbox full")


def test_a_run_of_throttling_replies_defers_the_domain():
    runs = DomainRuns(POLICY)
    first, second, third = feed(
        runs,
        "example.net",
        FOUR_XX,
        ("transient", "450 4.7.1 Rate limited, slow down"),
        ("transient", "451 Too many connections"),
    )
    assert first is None and second is None
    assert third.domain == "example.net" and third.until == T0 + dt.timedelta(seconds=60)
    assert third.level == 0


def test_each_further_run_doubles_the_deferral_up_to_the_cap():
    runs = DomainRuns(POLICY)
    deferrals = [d for d in feed(runs, "example.net", *[FOUR_XX] * 12) if d]
    assert [(d.until - T0).total_seconds() for d in deferrals] == [60, 120, 200, 200]


@pytest.mark.parametrize("reset", [("accepted", "250 2.0.0 Ok"), ("permanent", "550 5.1.1")])
def test_an_answer_from_the_domain_forgets_its_history(reset):
    runs = DomainRuns(POLICY)
    assert feed(runs, "example.net", *[FOUR_XX] * 3)[-1] is not None
    results = feed(runs, "example.net", FOUR_XX, FOUR_XX, reset, FOUR_XX, FOUR_XX)
    assert results == [None] * 5
    assert feed(runs, "example.net", FOUR_XX)[0].level == 0  # back to the first deferral


@pytest.mark.parametrize(
    "reply",
    [
        ("transient", None),  # connection refused, DNS failure: the relay, not the domain
        ("ambiguous", None),
        ("transient", "503 Service Unavailable"),  # not a 4yz
        MAILBOX_FULL,  # one message's trouble: neither counts nor ends the run
        ("transient", "451 4.3.0 Temporary failure"),
        ("transient", "451 4.7.1 Greylisted, please try again later"),
    ],
)
def test_failures_that_say_nothing_about_the_domain_do_not_count(reply):
    runs = DomainRuns(POLICY)
    assert feed(runs, "example.net", FOUR_XX, FOUR_XX, reply) == [None, None, None]
    assert feed(runs, "example.net", FOUR_XX)[0] is not None  # the run went on


def test_domains_are_counted_apart():
    runs = DomainRuns(POLICY)
    assert feed(runs, "a.example", FOUR_XX, FOUR_XX) == [None, None]
    assert feed(runs, "b.example", FOUR_XX, FOUR_XX) == [None, None]
    assert feed(runs, "a.example", FOUR_XX)[0].domain == "a.example"


def test_memory_is_bounded_by_forgetting_the_least_recent_domain():
    runs = DomainRuns(POLICY, max_domains=2)
    feed(runs, "a.example", FOUR_XX, FOUR_XX)
    feed(runs, "b.example", FOUR_XX)
    feed(runs, "c.example", FOUR_XX)  # a.example is forgotten
    assert feed(runs, "a.example", FOUR_XX) == [None]  # a run of one again; b is forgotten
    assert feed(runs, "c.example", FOUR_XX, FOUR_XX)[-1] is not None
    assert feed(runs, "b.example", FOUR_XX, FOUR_XX) == [None, None]


@pytest.mark.parametrize(
    "address, domain",
    [("Ada@Example.COM", "example.com"), ("a@b@c.example", "c.example"), ("nobody", "nobody")],
)
def test_recipient_domain(address, domain):
    assert recipient_domain(address) == domain


def test_is_domain_throttle():
    assert is_domain_throttle("transient", reply("452 Too many recipients this hour"))
    assert not is_domain_throttle("transient", reply("452 4.3.1 Insufficient system storage"))
    assert not is_domain_throttle("permanent", reply("421 4.7.0 try later"))
    assert not is_domain_throttle("transient", None)


# --- deferral in the database ------------------------------------------------------------


def test_a_run_of_4yz_defers_the_domains_due_intents_in_the_database(session_factory):
    from sqlalchemy import select, update

    from console.models import Intent, utcnow
    from console.outbox import enqueue
    from console.worker.guard import GuardPolicy, SendGuard
    from tests.support.claim_steps import on_engine

    now = utcnow()
    with session_factory() as session:
        for number, address in enumerate(
            [
                "a@example.net",
                "b@EXAMPLE.net",
                "c@xexample.net",  # another domain that ends the same way
                "d@example.org",
                "e@example.net",  # already waiting longer than the deferral
            ]
        ):
            enqueue(
                session, key=f"k{number}", to=address, template="login-code", params={"code": "1"}
            )
        session.flush()
        late = now + dt.timedelta(hours=5)
        session.execute(
            update(Intent).where(Intent.recipient == "e@example.net").values(next_attempt_at=late)
        )
        session.commit()

        guard = SendGuard(GuardPolicy(domains=POLICY), "w1")

        async def three_throttled(engine):
            for _ in range(3):
                refusal = SendResult(stage=ENVELOPE, code=421, reply_text="4.7.0 try later")
                deferral = guard.note_domain_outcome("z@example.net", "transient", refusal, now)
                await guard.after_outcome(
                    engine,
                    lane="critical",
                    outcome="transient",
                    code=421,
                    reached_transport=True,
                    now=now,
                    deferral=deferral,
                )

        on_engine(session.get_bind(), three_throttled)
        due = dict(session.execute(select(Intent.recipient, Intent.next_attempt_at)).all())
    deferred_until = now + dt.timedelta(seconds=60)
    assert due["a@example.net"] == deferred_until
    assert due["b@example.net"] == deferred_until  # the domain is stored lower-cased
    assert due["c@xexample.net"] < deferred_until and due["d@example.org"] < deferred_until
    assert due["e@example.net"] == late


def test_the_worker_defers_a_throttling_domain_and_keeps_sending_to_others(
    session_factory, make_worker, clock
):
    from sqlalchemy import select

    from console.core.backoff import Backoff
    from console.models import Intent
    from console.outbox import enqueue
    from console.transports.smtp import SmtpTransport
    from console.worker.guard import GuardPolicy
    from tests.support.smtp_server import ScriptedSMTPServer

    throttled = [f"{name}@throttle.example" for name in "abcdef"]
    others = ["g@other.example", "h@other.example"]
    script = {address: ["451 4.7.1 Rate limited", "250"] for address in throttled[:3]}
    with ScriptedSMTPServer(script=script) as server, session_factory() as session:
        for address in throttled + others:
            enqueue(session, key=address, to=address, template="login-code", params={"code": "1"})
        session.commit()
        worker = make_worker(
            SmtpTransport(server.url, timeout_seconds=2),
            random=0.0,
            backoff=Backoff(1, 1, 0),
            max_attempts=10,
            batch_size=3,
            lease_seconds=60,
            guard_policy=GuardPolicy(domains=POLICY),
        )
        assert worker.run_once().claimed == 3  # a, b, c: 451 each, a full run
        clock.advance(2)
        assert worker.run_once().claimed == 2  # only the other domain is due
        assert worker.run_once().claimed == 0
        received = [r.recipient for r in server.received]
        assert received == throttled[:3] + others
        clock.advance(60)
        while worker.run_once().claimed:
            pass
        statuses = set(session.execute(select(Intent.status)).scalars())
        assert statuses == {"submitted"}
