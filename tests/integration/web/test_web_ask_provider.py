"""The intent page's "Ask Postmark now": an operator asks the provider about an ambiguous send.

The worker sends through Postmark's native transport to the local provider API
server (``tests/support/provider_apis.py``), the answer is lost, and an operator
presses the button: the page asks Postmark's outbound message search and does
what the reconcile job would with its answer.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from console.config import load_settings
from console.models import AuditEntry, Intent, ProviderEvent, utcnow
from console.outbox import enqueue
from console.transports.factory import make_transport
from console.vocabulary import AMBIGUOUS, SUBMITTED
from tests.conftest import TEST_SECRET_KEY
from tests.support.provider_apis import postmark_role, start_apis, stop_apis

TOKEN = "server-token-0123"
WELCOME = {"name": "Bob", "login_url": "https://shop.example.com/login"}  # policy hold


@pytest.fixture
def apis():
    server = start_apis(postmark_role(TOKEN))
    yield server
    stop_apis(server)


@pytest.fixture
def horizon() -> float:
    """CONSOLE_RECONCILE_AFTER_SECONDS: by default already past when the operator asks."""
    return 0.001


@pytest.fixture
def provider() -> str:
    return "postmark"


@pytest.fixture
def environment(db_url, apis, horizon, provider) -> dict[str, str]:
    return {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
        "CONSOLE_TRANSPORT": "http",
        "CONSOLE_PROVIDER": provider,
        "CONSOLE_HTTP_PROVIDER_URL": apis.base_url,
        "CONSOLE_HTTP_PROVIDER_KEY": TOKEN,
        "CONSOLE_SMTP_TIMEOUT_SECONDS": "0.5",
        "CONSOLE_RECONCILE_AFTER_SECONDS": str(horizon),
    }


@pytest.fixture
def app(environment):
    """The console on this test's database, sending through Postmark at the local server."""
    from console.app import create_app
    from console.web.extensions import db

    app = create_app({**environment, "TESTING": True})
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def ambiguous(session_factory, make_worker, environment, apis, tmp_path):
    """Send one welcome mail whose answer is lost (`behaviour`); its id once ambiguous."""
    settings = load_settings(environment, instance_path=tmp_path)
    worker = make_worker(make_transport(settings), clock=utcnow)

    def send(behaviour: str) -> int:
        with session_factory() as session:
            intent_id = enqueue(
                session, key="welcome:1", to="ada@example.com", template="welcome", params=WELCOME
            ).id
            session.commit()
        apis.next(behaviour)
        worker.run_once(utcnow())  # the attempt starts now: the horizon counts from here
        assert status_of(session_factory, intent_id) == AMBIGUOUS
        return intent_id

    return send


def status_of(session_factory, intent_id: int) -> str:
    with session_factory() as session:
        return session.get(Intent, intent_id).status


def events_of(session_factory, intent_id: int) -> list[ProviderEvent]:
    with session_factory() as session:
        query = select(ProviderEvent).where(ProviderEvent.intent_id == intent_id)
        return list(session.scalars(query))


def asked_entries(session_factory, intent_id: int) -> list[AuditEntry]:
    with session_factory() as session:
        query = select(AuditEntry).where(
            AuditEntry.intent_id == intent_id, AuditEntry.action == "ask_provider"
        )
        return list(session.scalars(query))


def ask(client, intent_id: int, **form):
    form = {"csrf_token": client.csrf_token, "expected_status": AMBIGUOUS, **form}
    return client.post(f"/intents/{intent_id}/ask", data=form)


def answered_page(client, response) -> str:
    """Post/redirect/get: the 303's page, as the operator's browser shows it."""
    assert response.status_code == 303, response.text
    page = client.get(response.location)
    assert page.status_code == 200
    return page.text


def test_found_settles_the_intent_with_the_line_on_its_timeline(
    console_client, session_factory, apis, ambiguous
):
    intent_id = ambiguous("accept-hang")
    client = console_client("operator", "olga")
    assert "Ask Postmark now" in client.get(f"/intents/{intent_id}").text

    page = answered_page(client, ask(client, intent_id))

    assert status_of(session_factory, intent_id) == SUBMITTED
    assert "settled by asking Postmark" in page and "Ask Postmark now" not in page
    [entry] = asked_entries(session_factory, intent_id)
    assert (entry.actor, entry.before_status, entry.after_status) == ("olga", AMBIGUOUS, SUBMITTED)
    assert entry.details["answer"] == "found"
    assert len(apis.lookups) == 1 and len(apis.role("postmark").sends) == 1, "sent once"


def test_not_found_after_the_horizon_holds_it_with_the_words_on_the_page(
    console_client, session_factory, apis, ambiguous
):
    intent_id = ambiguous("drop-hang")
    client = console_client("operator", "olga")

    page = answered_page(client, ask(client, intent_id))

    assert status_of(session_factory, intent_id) == AMBIGUOUS, "welcome's policy: hold"
    assert "Postmark has no record of it (the attempt of" in page
    assert "no record of it yet" not in page
    [note] = events_of(session_factory, intent_id)
    assert note.event_type == "not_found"
    again = client.get(f"/intents/{intent_id}").text  # not only a flash: on its timeline
    assert "Provider: not_found" in again and "Postmark has no record of it" in again
    assert asked_entries(session_factory, intent_id)[0].details["answer"] == "not_found"
    assert apis.role("postmark").sends == [], "nothing sent"


@pytest.mark.parametrize("horizon", [3600.0])
def test_not_found_before_the_horizon_changes_nothing(
    console_client, session_factory, ambiguous, horizon
):
    intent_id = ambiguous("drop-hang")
    client = console_client("operator", "olga")

    page = answered_page(client, ask(client, intent_id))

    assert "Postmark has no record of it yet" in page
    assert status_of(session_factory, intent_id) == AMBIGUOUS
    assert events_of(session_factory, intent_id) == [], "the job asks again later"


@pytest.mark.parametrize("failure", ["500", "malformed"])
def test_a_failed_lookup_says_so_and_changes_nothing(
    console_client, session_factory, apis, ambiguous, failure
):
    intent_id = ambiguous("accept-hang")
    client = console_client("operator", "olga")
    apis.next_lookup(failure)

    page = answered_page(client, ask(client, intent_id))

    assert "Postmark could not be asked" in page and "nothing changed" in page
    assert 'role="alert"' in page
    assert status_of(session_factory, intent_id) == AMBIGUOUS
    assert events_of(session_factory, intent_id) == []


def test_an_intent_no_longer_ambiguous_answers_409_and_nothing_is_asked(
    console_client, session_factory, apis, ambiguous
):
    intent_id = ambiguous("accept-hang")
    client = console_client("operator", "olga")
    assert "Ask Postmark now" in client.get(f"/intents/{intent_id}").text
    with session_factory() as session:  # a colleague marked it accepted meanwhile
        session.execute(update(Intent).where(Intent.id == intent_id).values(status=SUBMITTED))
        session.commit()

    response = ask(client, intent_id)

    assert response.status_code == 409 and "no longer ambiguous" in response.text
    assert apis.lookups == [] and asked_entries(session_factory, intent_id) == []


def test_viewers_see_no_button_and_may_not_ask(console_client, session_factory, apis, ambiguous):
    intent_id = ambiguous("accept-hang")
    client = console_client("viewer", "vera")
    assert "Ask Postmark now" not in client.get(f"/intents/{intent_id}").text

    assert ask(client, intent_id).status_code == 403
    assert apis.lookups == [] and status_of(session_factory, intent_id) == AMBIGUOUS


def test_a_post_without_its_csrf_token_asks_nothing(console_client, apis, ambiguous):
    intent_id = ambiguous("accept-hang")
    client = console_client("operator", "olga")

    response = client.post(f"/intents/{intent_id}/ask", data={"expected_status": AMBIGUOUS})

    assert response.status_code == 400 and apis.lookups == []


@pytest.mark.parametrize("provider", ["resend", "ses"])
def test_no_button_where_the_provider_cannot_answer(app, console_client, apis, provider):
    from console.web.extensions import db

    with app.app_context():
        intent = enqueue(
            db.session, key="welcome:2", to="bob@example.com", template="welcome", params=WELCOME
        )
        db.session.flush()
        db.session.execute(update(Intent).where(Intent.id == intent.id).values(status=AMBIGUOUS))
        db.session.commit()
        intent_id = intent.id
    client = console_client("operator", "olga")
    assert "now</button>" not in client.get(f"/intents/{intent_id}").text

    page = answered_page(client, ask(client, intent_id))

    assert "Not asked" in page and apis.lookups == []
