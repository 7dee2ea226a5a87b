"""What keeps a pending intent from being sent now, in words: a hold, a deferred domain, a
paused lane. Its page says so beside the due time instead of "waiting for a worker"."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from console.core.readable import format_relative, format_time
from console.store.send_guards import active_deferrals, read_breakers
from console.vocabulary import CLOSED, PENDING
from console.web.holds import hold_until_words, holds_stopping


def _hold_waits(intent) -> list[str]:
    return [
        f"the release of {line.selector.notation()} (held since {format_time(line.hold.held_at)} "
        f"by {line.hold.held_by}, {hold_until_words(line.hold.until)})"
        for line in holds_stopping(intent)
    ]


def _domain_waits(session: Session, intent, now: dt.datetime) -> list[str]:
    domain = intent.recipient.rpartition("@")[2].lower()
    return [
        f"the end of {domain}'s deferral at {format_time(deferral.deferred_until)} "
        f"({format_relative(deferral.deferred_until, now)}): the domain asked us to slow down"
        for deferral in active_deferrals(session, now)
        if deferral.domain == domain
    ]


def _lane_waits(session: Session, intent, now: dt.datetime) -> list[str]:
    state = read_breakers(session).get(intent.lane)
    if state is None or state.state == CLOSED:
        return []
    probe = ""
    if state.resume_at:
        when = format_relative(state.resume_at, now)
        probe = f"; a probe may go at {format_time(state.resume_at)} ({when})"
    return [f"the {intent.lane} lane's circuit breaker to close{probe}"]


def waits_for(session: Session, intent, now: dt.datetime) -> list[str]:
    """What a pending intent waits for besides a worker; empty when nothing holds it."""
    if intent.status != PENDING:
        return []
    return (
        _hold_waits(intent)
        + _domain_waits(session, intent, now)
        + _lane_waits(session, intent, now)
    )
