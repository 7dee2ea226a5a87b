"""The dashboard's words for what the send guard holds back: paused lanes, deferred domains."""

from __future__ import annotations

from collections.abc import Sequence

from console.core.breaker import BreakerState
from console.state_tables import AlertState, DomainDeferral
from console.vocabulary import HALF_OPEN, OPEN


def lane_pause_notices(
    states: dict[str, BreakerState], firing: Sequence[AlertState] = ()
) -> list[str]:
    """Say, for the dashboard, which lanes their circuit breaker holds back and until when,
    unless a firing ``breaker_open`` alert already says so."""
    announced = {state.condition for state in firing}
    notices = []
    for lane, state in states.items():
        if f"breaker_open:{lane}" in announced:
            continue
        if state.state == OPEN and state.resume_at is not None:
            rate = (
                f"{state.failure_rate:.0%} of recent attempts failed; "
                if state.failure_rate
                else ""
            )
            notices.append(
                f"The {lane} lane is paused by its circuit breaker: {rate}"
                f"a probe goes at {state.resume_at:%H:%M:%S} UTC"
            )
        elif state.state == HALF_OPEN:
            notices.append(f"The {lane} lane is paused: one probe is testing the provider")
    return notices


def domain_deferral_notices(deferrals: Sequence[DomainDeferral]) -> list[str]:
    """Say, for the dashboard, which recipient domains are deferred and until when."""
    notices = []
    for deferral in deferrals:
        code = f" (it answered {deferral.reply_code})" if deferral.reply_code else ""
        notices.append(
            f"Mail to {deferral.domain} is deferred until "
            f"{deferral.deferred_until:%Y-%m-%d %H:%M:%S} UTC{code}: the domain asked us to "
            "slow down"
        )
    return notices
