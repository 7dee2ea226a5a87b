"""The casework example: one notice per assignment revision, none for a stale one."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from console.demo import casework
from console.demo.casework import Case, CaseAssignment, assign_case, create_tables
from console.mail.catalog import default_catalog
from console.models import Intent
from console.transports.memory import MemoryTransport
from console.vocabulary import CANCELLED, PENDING, SUBMITTED
from console.worker.decisions import EligibilityPolicy

GRACE = dict(reviewer_id=29, reviewer_name="Grace", reviewer_email="grace@example.com")
LINUS = dict(reviewer_id=30, reviewer_name="Linus", reviewer_email="linus@example.com")
TITLE = "Late refund for Mrs. Example, account 5521"  # private: never in the mail


def earlier(reviewer_id: int) -> dict:
    return dict(reviewer_id=reviewer_id, reviewer_name=f"R{reviewer_id}",
                reviewer_email=f"r{reviewer_id}@example.com")  # fmt: skip


@pytest.fixture
def casework_db(engine, session_factory):
    """The example's tables, and case 47 assigned five times already (among other cases)."""
    create_tables(engine)
    with session_factory() as session:
        for reviewer_id in range(21, 26):
            assign_case(session, case_id=47, case_title=TITLE, **earlier(reviewer_id))
            assign_case(session, case_id=48, case_title="Other", **earlier(reviewer_id + 10))
        session.commit()
    return session_factory


def counts(session_factory) -> tuple[int, int]:
    with session_factory() as session:
        assignments = session.scalar(select(func.count()).select_from(CaseAssignment))
        intents = session.scalar(select(func.count()).select_from(Intent))
    return assignments, intents


def intent_by_key(session_factory, key: str) -> Intent:
    with session_factory() as session:
        return session.scalars(select(Intent).filter_by(idempotency_key=key)).one()


def test_the_notice_is_keyed_by_the_cases_assignment_revision(casework_db):
    with casework_db() as session:
        assignment, intent = assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
    assert assignment.revision == 6
    assert intent.idempotency_key == intent.event == "case:47:assignment:6"
    assert intent.recipient_account == "reviewer:29"
    assert intent.params["revision"] == 6 and intent.purpose == "case-assignment"
    assert intent.template == "case-assigned" and intent.lane == "bulk"
    with casework_db() as session:
        case = session.get(Case, 47)
        assert (case.owner_reviewer_id, case.assignment_revision) == (29, 6)
    assert counts(casework_db) == (11, 11)


def test_a_retried_assignment_writes_nothing_and_returns_the_same_notice(casework_db):
    with casework_db() as session:
        first = assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
    with casework_db() as session:
        again = assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
    assert (again[0].id, again[1].id) == (first[0].id, first[1].id)
    assert counts(casework_db) == (11, 11), "a retried request mails once"


def test_failed_business_transaction_sends_nothing(engine, session_factory):
    create_tables(engine)
    with session_factory() as session:
        assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.rollback()  # a later business rule failed
    assert counts(session_factory) == (0, 0)
    with session_factory() as session:
        assert session.get(Case, 47) is None


def test_the_notice_is_historical_and_carries_no_case_content(casework_db):
    with casework_db() as session:
        _, intent = assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
    parts = default_catalog().render(intent.template, intent.template_version, intent.params)
    assigned_on = intent.params["assigned_on"]
    assert parts.subject == f"Case 47 was assigned to you on {assigned_on}"
    for body in (parts.text, parts.html):
        assert f"was assigned to you on {assigned_on}" in body
        assert "now assigned" not in body and "Late refund" not in body and "5521" not in body
    assert TITLE not in str(intent.params)


def test_a_notice_of_a_reassigned_case_is_cancelled_at_send_time(casework_db, make_worker):
    with casework_db() as session:
        assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
    with casework_db() as session:
        assign_case(session, case_id=47, case_title=TITLE, **LINUS)
        session.commit()
    policy = EligibilityPolicy.from_module("console.demo.casework")
    worker = make_worker(MemoryTransport(), eligibility=policy)
    worker.run_once()
    sent = sorted(email.recipient for email in worker.transport.sent)
    assert sent == ["linus@example.com", "r35@example.com"]  # r35: case 48's current owner
    grace = intent_by_key(casework_db, "case:47:assignment:6")
    assert grace.status == CANCELLED
    assert grace.status_reason.endswith("case reassigned to a newer revision")
    assert intent_by_key(casework_db, "case:47:assignment:7").status == SUBMITTED
    stale = [intent_by_key(casework_db, f"case:47:assignment:{n}") for n in range(1, 6)]
    assert {intent.status for intent in stale} == {CANCELLED}


def test_the_check_lets_a_current_notice_go_and_stops_one_whose_case_is_gone(casework_db):
    with casework_db() as session:
        _, intent = assign_case(session, case_id=47, case_title=TITLE, **GRACE)
        session.commit()
        assert intent.status == PENDING
        check = casework.ELIGIBILITY_CHECKS["case-assignment"]
        assert check(intent, session) is None
        intent.params = {**intent.params, "case_id": 999}
        assert check(intent, session) == "the case no longer exists"
        session.rollback()


def test_a_demo_database_from_before_revisions_gets_the_tables_anew(tmp_path):
    from sqlalchemy import create_engine, inspect, text

    from console.demo.casework import create_tables

    engine = create_engine(f"sqlite:///{tmp_path / 'old-demo.db'}")
    with engine.begin() as connection:
        connection.execute(
            text("CREATE TABLE case_assignment (id INTEGER PRIMARY KEY, reviewer_id INTEGER)")
        )
    create_tables(engine)
    columns = {column["name"] for column in inspect(engine).get_columns("case_assignment")}
    assert "revision" in columns and inspect(engine).has_table("case")
