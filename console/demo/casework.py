"""A demo business action: assign a case to a reviewer and notify them, atomically.

The assignment row and the email intent are written in ONE transaction: either
both exist or neither does. The idempotency key is derived from the business
event (``case:47:assignment:6``), so retrying the action never mails twice.

The ``case_assignment`` table belongs to this example application, not to the
outbox: it lives in its own metadata and is created by ``create_tables``.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import DateTime, Engine, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from console.models import Intent, utcnow
from console.outbox import enqueue


class CaseworkBase(DeclarativeBase):
    """The example application's own tables, apart from the outbox's."""


class CaseAssignment(CaseworkBase):
    __tablename__ = "case_assignment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    case_id: Mapped[int] = mapped_column(Integer)
    reviewer_id: Mapped[int] = mapped_column(Integer)
    reviewer_email: Mapped[str] = mapped_column(String(320))
    assigned_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


def create_tables(engine: Engine) -> None:
    """Create the example application's own table."""
    CaseworkBase.metadata.create_all(engine)


def assign_case(
    session: Session,
    *,
    case_id: int,
    case_title: str,
    reviewer_id: int,
    reviewer_name: str,
    reviewer_email: str,
) -> tuple[CaseAssignment, Intent]:
    """Record the assignment and its notification in the caller's transaction."""
    assignment = CaseAssignment(
        case_id=case_id,
        reviewer_id=reviewer_id,
        reviewer_email=reviewer_email,
        assigned_at=utcnow(),
    )
    session.add(assignment)
    session.flush()  # the assignment id is part of the business event
    event = f"case:{case_id}:assignment:{assignment.id}"
    intent = enqueue(
        session,
        key=event,
        event=event,
        to=reviewer_email,
        template="case-assigned",
        params={
            "case_id": case_id,
            "case_title": case_title,
            "reviewer_name": reviewer_name,
            "case_url": f"https://cases.example.com/cases/{case_id}",
        },
        purpose="case-assignment",
    )
    return assignment, intent
