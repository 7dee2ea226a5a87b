"""A slow provider never holds the console: the button says "no answer yet", a run stops at
the first unanswered lookup, and a stop ends a run after the lookup in flight.

Providers on 127.0.0.1 that trickle or say nothing (``tests/support/slow_provider.py``);
the ambiguous intents are an hour old, so each is asked. Only generous bounds on time
are asserted.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from console.config import load_settings
from console.mail.catalog import catalog_for
from console.models import Intent, ProviderEvent
from console.ops.jobs.provider_asking import run
from console.transports.lookup_core import ProviderLookup
from console.transports.postmark_lookup import PostmarkLookupApi
from console.vocabulary import AMBIGUOUS
from tests.conftest import TEST_SECRET_KEY
from tests.support import slow_provider
from tests.support.slow_provider import add_ambiguous_intents

DEADLINE_SECONDS = 0.5  # the job's lookup deadline here (10 s in the product)
WELL_WITHIN_SECONDS = 15.0
SERVERS = {"silent": slow_provider.silent, "trickling body": slow_provider.trickling_body}


@pytest.fixture(params=list(SERVERS))
def slow_server(request):
    server = SERVERS[request.param]()
    yield server
    server.close()


def environment(db_url: str, server) -> dict[str, str]:
    return {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
        "CONSOLE_TRANSPORT": "http",
        "CONSOLE_PROVIDER": "postmark",
        "CONSOLE_HTTP_PROVIDER_URL": server.base_url,
        "CONSOLE_HTTP_PROVIDER_KEY": "server-token-0123",
        "CONSOLE_RECONCILE_AFTER_SECONDS": "3600",
    }


@pytest.fixture
def app(db_url, slow_server):
    """The console on this test's database, asking Postmark at the slow server."""
    from console.app import create_app
    from console.web.extensions import db

    app = create_app({**environment(db_url, slow_server), "TESTING": True})
    yield app
    with app.app_context():
        db.engine.dispose()


def statuses_and_events(session_factory) -> tuple[set[str], int]:
    with session_factory() as session:
        statuses = set(session.scalars(select(Intent.status)))
        return statuses, session.scalar(select(func.count()).select_from(ProviderEvent))


BUTTON_DEADLINE_SECONDS = 1.0  # the button's deadline here (ASK_TIMEOUT_SECONDS in the product)


def test_the_button_waits_at_most_the_documented_five_seconds():
    from console.web.intents import ASK_TIMEOUT_SECONDS

    assert ASK_TIMEOUT_SECONDS <= 5.0  # docs/http-providers.md


def test_ask_now_says_no_answer_yet_and_changes_nothing(
    console_client, session_factory, slow_server, monkeypatch
):
    monkeypatch.setattr("console.web.intents.ASK_TIMEOUT_SECONDS", BUTTON_DEADLINE_SECONDS)
    [intent_id] = add_ambiguous_intents(session_factory, 1)
    client = console_client("operator", "olga")
    form = {"csrf_token": client.csrf_token, "expected_status": AMBIGUOUS}

    started = time.monotonic()
    response = client.post(f"/intents/{intent_id}/ask", data=form)
    elapsed = time.monotonic() - started

    assert elapsed < WELL_WITHIN_SECONDS
    assert response.status_code == 303, response.text
    page = client.get(response.location).text
    assert "No answer yet from Postmark" in page and "nothing changed" in page
    assert len(slow_server.requests) == 1
    assert statuses_and_events(session_factory) == ({AMBIGUOUS}, 0)


def asking(db_url, server, tmp_path):
    """The settings and a lookup with a short deadline, for the reconcile job's run."""
    settings = load_settings(environment(db_url, server), instance_path=tmp_path)
    api = PostmarkLookupApi(server.base_url, "server-token-0123")
    return settings, ProviderLookup(api, timeout_seconds=DEADLINE_SECONDS)


def test_a_run_stops_at_the_first_unanswered_lookup(db_url, session_factory, slow_server, tmp_path):
    add_ambiguous_intents(session_factory, 3)
    settings, lookup = asking(db_url, slow_server, tmp_path)

    started = time.monotonic()
    report = run(session_factory, settings, lookup, catalog_for(settings), sleep=lambda s: None)

    assert time.monotonic() - started < WELL_WITHIN_SECONDS
    assert (report.asked, report.failed) == (1, 1)
    assert len(slow_server.requests) == 1, "the others wait for the next run"
    assert statuses_and_events(session_factory) == ({AMBIGUOUS}, 0)


def test_a_stop_ends_the_run_after_the_lookup_in_flight(db_url, session_factory, tmp_path):
    add_ambiguous_intents(session_factory, 3)
    server = slow_provider.slow_but_answering(seconds=0.2)
    server.hold()
    settings, lookup = asking(db_url, server, tmp_path)
    stop, reports = threading.Event(), []

    def job() -> None:
        catalog = catalog_for(settings)
        reports.append(run(session_factory, settings, lookup, catalog, stop=stop))

    running = threading.Thread(target=job, daemon=True)
    try:
        running.start()
        server.wait_for_requests(1, WELL_WITHIN_SECONDS)
        stop.set()
        server.release()
        running.join(WELL_WITHIN_SECONDS)
    finally:
        server.close()
    assert not running.is_alive()
    [report] = reports
    assert (report.asked, report.failed) == (1, 0), "answered: not found yet"
    assert len(server.requests) == 1
