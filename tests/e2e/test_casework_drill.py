"""The casework drill, with real processes: a retried request, a killed worker and a
reassignment while the first notice waits; the reviewer who holds the case gets one mail.
"""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import func, select, update

from console.demo.casework import REASSIGNED, CaseAssignment, assign_case, create_tables
from console.models import Intent
from console.store.database import make_engine, make_session_factory
from console.vocabulary import CANCELLED, SENDING, SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer
from tests.support.worker_runs import new_database, start_worker, wait_for, worker_environment

pytestmark = pytest.mark.slow

SETTLE_TIMEOUT_SECONDS = 60
TITLE = "Late refund for Mrs. Example"
GRACE = dict(reviewer_id=29, reviewer_name="Grace", reviewer_email="grace@example.com")
LINUS = dict(reviewer_id=30, reviewer_name="Linus", reviewer_email="linus@example.com")


def test_the_casework_drill(backend, request, tmp_path):
    url = new_database(backend, request, tmp_path)
    engine = make_engine(url)
    create_tables(engine)
    sessions = make_session_factory(engine)

    def assign(reviewer: dict) -> tuple[int, int, int]:
        with sessions() as session:
            assignment, intent = assign_case(session, case_id=47, case_title=TITLE, **reviewer)
            session.commit()
            return assignment.revision, assignment.id, intent.id

    def intent(intent_id: int) -> Intent:
        with sessions() as session:
            return session.get(Intent, intent_id)

    def counts() -> tuple[int, int]:
        with sessions() as session:
            assignments = session.scalar(select(func.count()).select_from(CaseAssignment))
            return assignments, session.scalar(select(func.count()).select_from(Intent))

    try:
        for reviewer_id in range(21, 26):  # five earlier assignments; their notices went out
            assign(dict(reviewer_id=reviewer_id, reviewer_name=f"R{reviewer_id}",
                        reviewer_email=f"r{reviewer_id}@example.com"))  # fmt: skip
        with sessions() as session:
            session.execute(update(Intent).values(status=SUBMITTED))
            session.commit()

        revision, assignment_id, grace_notice = assign(GRACE)
        assert revision == 6
        assert intent(grace_notice).idempotency_key == "case:47:assignment:6"
        assert intent(grace_notice).recipient_account == "reviewer:29"
        assert assign(GRACE) == (6, assignment_id, grace_notice), "the retried request"
        assert counts() == (6, 6), "the retry wrote nothing"

        with ScriptedSMTPServer() as server:
            checks = dict(CONSOLE_ELIGIBILITY_MODULE="console.demo.casework")
            crashing = worker_environment(
                url, server.url, CONSOLE_TEST_CRASH_AT="claimed", **checks
            )
            worker = start_worker(crashing, tmp_path / "killed.log")
            assert worker.wait(SETTLE_TIMEOUT_SECONDS) == -signal.SIGKILL
            assert intent(grace_notice).status == SENDING, "claimed by the killed worker"
            assert server.received == [], "killed before sending"

            revision, _, linus_notice = assign(LINUS)  # while Grace's notice waits
            assert revision == 7

            restarted = start_worker(worker_environment(url, server.url, **checks),
                                     tmp_path / "restarted.log")  # fmt: skip
            try:
                wait_for(
                    lambda: (
                        intent(grace_notice).status == CANCELLED
                        and intent(linus_notice).status == SUBMITTED
                    ),
                    SETTLE_TIMEOUT_SECONDS,
                    "Grace's notice cancelled and Linus's sent",
                )
            finally:
                restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(30) == 0
            received = server.received

        assert [(mail.recipient, mail.result) for mail in received] == [
            ("linus@example.com", "250")
        ], "exactly one mail, to the reviewer who holds the case"
        assert received[0].message_id == intent(linus_notice).message_id
        assert intent(grace_notice).status_reason.endswith(REASSIGNED)
    finally:
        engine.dispose()
