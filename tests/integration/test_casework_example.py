"""The demo business action writes its row and its intent in one transaction."""

from sqlalchemy import func, select

from console.demo.casework import CaseAssignment, assign_case, create_tables
from console.models import Intent

REVIEWER = dict(reviewer_id=29, reviewer_name="Grace", reviewer_email="grace@example.com")


def counts(session_factory) -> tuple[int, int]:
    with session_factory() as session:
        assignments = session.scalar(select(func.count()).select_from(CaseAssignment))
        intents = session.scalar(select(func.count()).select_from(Intent))
    return assignments, intents


def test_assignment_and_intent_commit_together(engine, session_factory):
    create_tables(engine)
    with session_factory() as session:
        for _ in range(5):  # assignments 1..5 of other cases
            session.add(
                CaseAssignment(
                    case_id=1, reviewer_id=1, reviewer_email="x@example.com", assigned_at=func.now()
                )
            )
        session.commit()
    with session_factory() as session:
        assignment, intent = assign_case(session, case_id=47, case_title="Late refund", **REVIEWER)
        session.commit()
    assert assignment.id == 6
    assert intent.idempotency_key == "case:47:assignment:6"
    assert intent.event == "case:47:assignment:6"
    assert intent.template == "case-assigned" and intent.lane == "bulk"
    assert counts(session_factory) == (6, 1)


def test_failed_business_transaction_sends_nothing(engine, session_factory):
    create_tables(engine)
    with session_factory() as session:
        assign_case(session, case_id=47, case_title="Late refund", **REVIEWER)
        session.rollback()  # a later business rule failed
    assert counts(session_factory) == (0, 0)
