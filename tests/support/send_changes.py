"""What can happen to a claimed intent between its claim and its mark, done from outside
the worker: its recipient suppressed, or its attempt taken back by the lease sweep."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from console.models import utcnow
from console.store.suppressions import add_suppression


def suppress(engine, address: str) -> None:
    """Put `address` on the suppression list, committed."""
    with Session(engine) as session:
        add_suppression(session, address, actor="operator", reason="asked after the claim")
        session.commit()


def sweep(engine, attempt_id: int) -> None:
    """What the lease-expiry sweep does to an attempt it takes back: finished, no body."""
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE email_attempt SET finished_at = :now WHERE id = :id"),
            {"now": utcnow(), "id": attempt_id},
        )
