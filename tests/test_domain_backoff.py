"""Per-domain back-off: a run of 4yz from one domain defers it, longer on each run."""

from __future__ import annotations

import datetime as dt

import pytest

from console.core.domain_backoff import (
    DomainBackoffPolicy,
    DomainRuns,
    is_domain_throttle,
    recipient_domain,
)

T0 = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)
POLICY = DomainBackoffPolicy(run_length=3, base_seconds=60, cap_seconds=200)


def feed(runs: DomainRuns, domain: str, *replies: tuple[str, int | None]):
    return [runs.record(domain, outcome, code, T0) for outcome, code in replies]


FOUR_XX = ("transient", 421)


def test_a_run_of_4yz_defers_the_domain():
    runs = DomainRuns(POLICY)
    first, second, third = feed(
        runs, "example.net", FOUR_XX, ("transient", 450), ("transient", 451)
    )
    assert first is None and second is None
    assert third.domain == "example.net" and third.until == T0 + dt.timedelta(seconds=60)
    assert third.level == 0


def test_each_further_run_doubles_the_deferral_up_to_the_cap():
    runs = DomainRuns(POLICY)
    deferrals = [d for d in feed(runs, "example.net", *[FOUR_XX] * 12) if d]
    assert [(d.until - T0).total_seconds() for d in deferrals] == [60, 120, 200, 200]


@pytest.mark.parametrize("reset", [("accepted", 250), ("permanent", 550)])
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
        ("transient", 503),  # an HTTP provider's outage, not a domain's throttling
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
    assert is_domain_throttle("transient", 452)
    assert not is_domain_throttle("permanent", 550)
    assert not is_domain_throttle("transient", None)
