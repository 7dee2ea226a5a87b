"""Crash safety over an HTTP transport: a real `console worker` sending through Postmark's
native API (the local provider API server) is killed with SIGKILL between the request and
its recorded answer, then restarted. Nothing is sent twice: the restarted worker holds the
intent as ambiguous (its template's policy is `hold`) and its reconcile job settles it by
asking Postmark.
"""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import select

from console.models import Attempt, ProviderEvent
from console.store.database import make_engine, make_session_factory
from console.vocabulary import AMBIGUOUS, DATA_SENT, SENDING, SUBMITTED
from tests.support.provider_apis import postmark_role, start_apis, stop_apis
from tests.support.worker_runs import (
    ORDER,
    SETTLE_TIMEOUT_SECONDS,
    attempt_outcomes,
    enqueue_scenario,
    intent_rows,
    new_database,
    start_worker,
    wait_for,
    worker_environment,
)

pytestmark = pytest.mark.slow

TOKEN = "server-token-0123"
HORIZON_SECONDS = 2.0  # CONSOLE_RECONCILE_AFTER_SECONDS: "not found" counts this soon


@pytest.fixture
def apis():
    server = start_apis(postmark_role(TOKEN))
    yield server
    stop_apis(server)


def http_environment(db_url: str, apis, **extra: str) -> dict[str, str]:
    return worker_environment(
        db_url,
        "smtp://127.0.0.1:9",  # not used: the worker sends over HTTP
        CONSOLE_TRANSPORT="http",
        CONSOLE_PROVIDER="postmark",
        CONSOLE_HTTP_PROVIDER_URL=apis.base_url,
        CONSOLE_HTTP_PROVIDER_KEY=TOKEN,
        CONSOLE_RECONCILE_SECONDS="0.5",
        CONSOLE_RECONCILE_AFTER_SECONDS=str(HORIZON_SECONDS),
        CONSOLE_BATCH_SIZE="1",
        **extra,
    )


def events_of(db_url: str, intent_id: int) -> list[ProviderEvent]:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            query = select(ProviderEvent).where(ProviderEvent.intent_id == intent_id)
            return list(session.scalars(query))
    finally:
        engine.dispose()


def held_at_data_sent(db_url: str) -> list:
    """The intents killed holding their lease past the data_sent mark (others may be
    leased too: claimed ahead, never handed over)."""
    return [
        row
        for row in intent_rows(db_url)
        if row.status == SENDING and attempt_outcomes(db_url, row.id, Attempt.stage) == [DATA_SENT]
    ]


def sent_message_ids(apis) -> list[str]:
    """The Message-ID of every message Postmark took, in order."""
    return [
        header["Value"]
        for send in apis.role("postmark").sends
        for header in send["fields"]["Headers"]
        if header["Name"] == "Message-ID"
    ]


def restart_until(db_url: str, apis, tmp_path, done, what: str) -> None:
    """Run a plain worker until `done()`; then stop it cleanly."""
    worker = start_worker(http_environment(db_url, apis), tmp_path / "again.log")
    try:
        wait_for(done, SETTLE_TIMEOUT_SECONDS, what)
    finally:
        worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_killed_with_the_request_in_flight_is_settled_by_asking_and_sent_once(
    backend, request, tmp_path, apis
):
    url = new_database(backend, request, tmp_path)
    enqueue_scenario(url, 1, ORDER)
    apis.next("accept-hang")  # Postmark takes the first message; its answer never comes
    worker = start_worker(http_environment(url, apis), tmp_path / "crash.log")
    wait_for(lambda: apis.role("postmark").sends, SETTLE_TIMEOUT_SECONDS, "Postmark's send")
    worker.send_signal(signal.SIGKILL)
    assert worker.wait(SETTLE_TIMEOUT_SECONDS) == -signal.SIGKILL
    [held] = held_at_data_sent(url)  # its answer unrecorded
    rows = lambda: {row.id: row for row in intent_rows(url)}  # noqa: E731

    # the held one settled by asking; the others sent, one maybe claimed ahead before the
    # kill and given back by the sweep once its lease expired
    all_submitted = lambda: {row.status for row in rows().values()} == {SUBMITTED}  # noqa: E731
    restart_until(url, apis, tmp_path, all_submitted, "the asking and the other sends")

    assert sorted(sent_message_ids(apis)) == sorted(r.message_id for r in rows().values())
    assert sent_message_ids(apis)[0] == held.message_id, "each intent sent once"
    settled = rows()[held.id]
    assert settled.provider_message_id == apis.role("postmark").sends[0]["id"]
    assert attempt_outcomes(url, held.id) == ["ambiguous"], "held, never resent"
    [found] = events_of(url, held.id)
    assert "settled by asking Postmark" in found.diagnostic
    assert all(row.status == SUBMITTED for row in rows().values())


def test_killed_at_data_sent_is_held_with_the_providers_no_record_and_never_sent(
    backend, request, tmp_path, apis
):
    url = new_database(backend, request, tmp_path)
    enqueue_scenario(url, 2, ORDER)
    crashing = http_environment(url, apis, CONSOLE_TEST_CRASH_AT="data_sent")
    worker = start_worker(crashing, tmp_path / "crash.log")
    assert worker.wait(SETTLE_TIMEOUT_SECONDS) == -signal.SIGKILL, "killed at data_sent"
    assert apis.role("postmark").sends == [] and apis.requests == [], "the request never left"
    [held] = held_at_data_sent(url)

    def noted_and_the_others_sent() -> bool:
        others_sent = all(
            row.status == SUBMITTED for row in intent_rows(url) if row.id != held.id
        )  # the sweep gave them back; the restarted worker sends them as it asks Postmark
        noted = any(e.event_type == "not_found" for e in events_of(url, held.id))
        return others_sent and noted

    what = "Postmark's 'no record of it', and the others sent"
    restart_until(url, apis, tmp_path, noted_and_the_others_sent, what)

    rows = {row.id: row for row in intent_rows(url)}
    assert rows[held.id].status == AMBIGUOUS, "the template's policy is hold: an operator decides"
    assert attempt_outcomes(url, held.id) == ["ambiguous"]
    [note] = events_of(url, held.id)
    assert "Postmark has no record of it" in note.diagnostic
    others = [row for row in rows.values() if row.id != held.id]
    assert sorted(sent_message_ids(apis)) == sorted(row.message_id for row in others)
    assert all(row.status == SUBMITTED for row in others), "the others sent once each"
