"""A worked example: assign a case to a reviewer and notify them, atomically and once.

The application keeps a ``case`` row with its current owner and an assignment
**revision** that goes up by one per reassignment. ``assign_case`` writes the new
owner, the revision, the assignment's history row and the notice in ONE
transaction, keyed by the revision (``case:47:assignment:6``): either all exist
or none does, and a retried request (the same owner again) writes nothing.

A notice still queued when the case moves on must not go out: with
``CONSOLE_ELIGIBILITY_MODULE=console.demo.casework`` the worker asks
``ELIGIBILITY_CHECKS["case-assignment"]`` at send time and cancels a notice whose
revision is no longer the case's current one. The template's wording is
historical ("was assigned to you on <date>") and names no case content.

These tables belong to the example application, not to the outbox: they live in
their own metadata and are created by ``create_tables``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
    inspect,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from console.models import Intent, utcnow
from console.outbox import enqueue
from console.store.intents import intent_by_key

PURPOSE = "case-assignment"
REASSIGNED = "case reassigned to a newer revision"
CASE_GONE = "the case no longer exists"


class CaseworkBase(DeclarativeBase):
    """The example application's own tables, apart from the outbox's."""


class Case(CaseworkBase):
    """A case, its current owner and how many times it was assigned."""

    __tablename__ = "case"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    title: Mapped[str] = mapped_column(String(200))
    owner_reviewer_id: Mapped[int | None] = mapped_column(Integer)
    assignment_revision: Mapped[int] = mapped_column(Integer, default=0)


class CaseAssignment(CaseworkBase):
    """One assignment of a case: revision N of its owner."""

    __tablename__ = "case_assignment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("case.id"))
    revision: Mapped[int] = mapped_column(Integer)
    reviewer_id: Mapped[int] = mapped_column(Integer)
    reviewer_email: Mapped[str] = mapped_column(String(320))
    assigned_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (UniqueConstraint("case_id", "revision"),)


def create_tables(engine: Engine) -> None:
    """Create the example application's own tables.

    A demo database from before assignments had revisions holds a ``case_assignment``
    table without that column: the example's tables are then made anew.
    """
    inspector = inspect(engine)
    if inspector.has_table("case_assignment"):
        columns = {column["name"] for column in inspector.get_columns("case_assignment")}
        if "revision" not in columns:
            CaseworkBase.metadata.drop_all(engine)
    CaseworkBase.metadata.create_all(engine)


def assignment_key(case_id: int, revision: int) -> str:
    """Return the business event and idempotency key of one assignment's notice."""
    return f"case:{case_id}:assignment:{revision}"


def _locked_case(session: Session, case_id: int) -> Case | None:
    query = select(Case).where(Case.id == case_id).with_for_update()
    return session.scalars(query.execution_options(populate_existing=True)).one_or_none()


def _current(session: Session, case: Case) -> tuple[CaseAssignment, Intent]:
    query = select(CaseAssignment).filter_by(case_id=case.id, revision=case.assignment_revision)
    assignment = session.scalars(query).one()
    intent = intent_by_key(session, assignment_key(case.id, case.assignment_revision))
    assert intent is not None, "every assignment was written with its notice"
    return assignment, intent


def assign_case(
    session: Session,
    *,
    case_id: int,
    case_title: str,
    reviewer_id: int,
    reviewer_name: str,
    reviewer_email: str,
) -> tuple[CaseAssignment, Intent]:
    """Make the reviewer the case's owner and queue their notice, in the caller's transaction.

    Assigning a case to the reviewer who already owns it writes nothing and
    returns that assignment and its notice: a retried request mails once.
    """
    case = _locked_case(session, case_id)
    if case is None:
        case = Case(id=case_id, title=case_title, assignment_revision=0)
        session.add(case)
    elif case.owner_reviewer_id == reviewer_id:
        return _current(session, case)
    case.owner_reviewer_id = reviewer_id
    case.assignment_revision += 1
    assigned_at = utcnow()
    assignment = CaseAssignment(
        case_id=case_id,
        revision=case.assignment_revision,
        reviewer_id=reviewer_id,
        reviewer_email=reviewer_email,
        assigned_at=assigned_at,
    )
    session.add(assignment)
    session.flush()
    key = assignment_key(case_id, assignment.revision)
    intent = enqueue(
        session,
        key=key,
        event=key,
        to=reviewer_email,
        template="case-assigned",
        params={  # no case content: the title and the case's details stay behind the login
            "case_id": case_id,
            "revision": assignment.revision,
            "reviewer_name": reviewer_name,
            "assigned_on": assigned_at.date().isoformat(),
            "case_url": f"https://cases.example.com/cases/{case_id}",
        },
        purpose=PURPOSE,
        recipient_account=f"reviewer:{reviewer_id}",
    )
    return assignment, intent


def still_current_assignment(intent: Any, session: Session) -> str | None:
    """Say why a notice must not go out: its case was reassigned since, or is gone."""
    params = intent.params or {}
    if "revision" not in params:  # a notice written before revisions were kept
        return None
    current = session.scalar(select(Case.assignment_revision).where(Case.id == params["case_id"]))
    if current is None:
        return CASE_GONE
    return REASSIGNED if current != params["revision"] else None


ELIGIBILITY_CHECKS = {PURPOSE: still_current_assignment}
