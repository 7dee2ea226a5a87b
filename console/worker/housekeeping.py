"""What a tick does before it claims: heartbeat, silent workers' leases, early provider events;
and the heartbeat's last word when the worker stops cleanly."""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import socket

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from console.core.lifecycle import Decision
from console.store import claims
from console.store import heartbeats as figures
from console.store.claims import ExpiredLease
from console.store.provider_events import match_unmatched_events
from console.worker.decisions import SendDecisions

log = logging.getLogger("console.worker.loop")


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
    figures.beat(
        session,
        worker_id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=started_at,
        now=now,
    )
    swept = []
    for lease in claims.take_expired_leases(session, now=now):
        classification, decision = decisions.at_lease_expiry(lease, now)
        if claims.settle_expired_lease(session, lease, classification, decision, now):
            swept.append((lease, decision))
    match_unmatched_events(session, now=now)  # provider events that came before their id
    return swept


def record_clean_stop(
    session_factory: sessionmaker[Session], worker_id: str, now: dt.datetime
) -> None:
    """Write on the heartbeat that the worker stopped cleanly at `now`; commit.

    A database that fails then is logged: the worker stops all the same.
    """
    try:
        with session_factory() as session:
            figures.record_stop(session, worker_id=worker_id, now=now)
            session.commit()
    except SQLAlchemyError as error:
        log.warning(
            "the worker's stop was not recorded",
            extra=dict(worker_id=worker_id, error_type=type(error).__name__),
        )
