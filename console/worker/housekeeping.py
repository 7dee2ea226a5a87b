"""What a tick does before it claims: heartbeat, silent workers' leases, early provider events."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket

from sqlalchemy.orm import Session

from console.core.lifecycle import Decision
from console.store import heartbeats, lease_sweep
from console.store.events import match_unmatched_events
from console.store.lease_sweep import ExpiredLease
from console.worker.decisions import SendDecisions


def new_worker_id() -> str:
    """Return ``host:pid:random``, unique among every worker sharing the database."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def housekeeping(
    session: Session,
    worker_id: str,
    started_at: dt.datetime,
    decisions: SendDecisions,
    now: dt.datetime,
) -> list[tuple[ExpiredLease, Decision]]:
    """Beat, settle the leases of silent workers as decided, match waiting events.

    In the caller's transaction (the caller commits); returns the leases taken back.
    """
    heartbeats.beat(
        session,
        worker_id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=started_at,
        now=now,
    )
    swept = []
    for lease in lease_sweep.take_expired_leases(session, now=now):
        classification, decision = decisions.at_lease_expiry(lease, now)
        if lease_sweep.settle_expired_lease(session, lease, classification, decision, now):
            swept.append((lease, decision))
    match_unmatched_events(session, now=now)  # provider events that came before their id
    return swept
