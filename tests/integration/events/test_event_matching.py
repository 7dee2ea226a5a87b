"""Provider events attach to the right mail or to none: provider id, recipient, Message-ID."""

from __future__ import annotations

import html
import smtplib
import socket
import uuid
from email.message import EmailMessage

import pytest
from sqlalchemy import select, update

from console.demo.smtp_capture import DemoSMTPServer
from console.events import ReportedEvent
from console.models import Attempt, Intent, ProviderEvent, Suppression, utcnow
from console.outbox import enqueue
from console.store.provider_events import match_unmatched_events, record_events
from console.vocabulary import SUBMITTED
from tests.support.smtp_server import ScriptedSMTPServer

REUSED_ID = "DEMO000001"  # what the demo capture server handed out after every restart


def make_intent(session_factory, to: str, *, provider_id=None, on_attempt=False) -> int:
    """A submitted intent to `to`; its provider id on the intent or on its attempt."""
    with session_factory() as session:
        intent = enqueue(
            session, key=str(uuid.uuid4()), to=to, template="login-code", params={"code": "1"}
        )
        session.flush()
        on_intent = None if on_attempt else provider_id
        session.execute(
            update(Intent)
            .where(Intent.id == intent.id)
            .values(status=SUBMITTED, provider_message_id=on_intent)
        )
        if on_attempt and provider_id:
            session.add(
                Attempt(
                    intent_id=intent.id,
                    attempt_number=1,
                    lease_token=uuid.uuid4().hex,
                    started_at=utcnow(),
                    provider_message_id=provider_id,
                )
            )
        session.commit()
        return intent.id


def store_provider_id(session_factory, intent_id: int, provider_id: str) -> None:
    """What the worker's T2 does once the relay answered."""
    with session_factory() as session:
        session.execute(
            update(Intent).where(Intent.id == intent_id).values(provider_message_id=provider_id)
        )
        session.commit()


def bounce(recipient, provider_id=REUSED_ID, message_id=None, event_type="bounced"):
    return ReportedEvent(
        source="webhook",
        source_event_id=str(uuid.uuid4()),
        event_type=event_type,
        recipient=recipient,
        bounce_type="permanent" if event_type == "bounced" else None,
        diagnostic="smtp; 550 5.1.1 user unknown",
        provider_message_id=provider_id,
        message_id=message_id,
    )


def record(session_factory, *events: ReportedEvent) -> list[int]:
    """Record `events`; return their row ids in order."""
    with session_factory() as session:
        record_events(session, list(events))
        session.commit()
        ids = [
            session.scalars(
                select(ProviderEvent.id).where(ProviderEvent.source_event_id == e.source_event_id)
            ).one()
            for e in events
        ]
    return ids


def event(session_factory, event_id) -> ProviderEvent:
    with session_factory() as session:
        return session.get(ProviderEvent, event_id)


def intent(session_factory, intent_id) -> Intent:
    with session_factory() as session:
        return session.get(Intent, intent_id)


def match_later(session_factory) -> int:
    with session_factory() as session:
        matched = match_unmatched_events(session)
        session.commit()
        return matched


@pytest.mark.parametrize("on_attempt", [False, True], ids=["id on the intent", "id on an attempt"])
def test_two_intents_sharing_a_provider_id_each_get_their_own_bounce(session_factory, on_attempt):
    ada = make_intent(
        session_factory, "ada@example.com", provider_id=REUSED_ID, on_attempt=on_attempt
    )
    linus = make_intent(
        session_factory, "linus@example.com", provider_id=REUSED_ID, on_attempt=on_attempt
    )

    to_linus, to_ada = record(
        session_factory, bounce("linus@example.com"), bounce("Ada@Example.com")
    )

    assert event(session_factory, to_linus).intent_id == linus
    assert event(session_factory, to_ada).intent_id == ada
    for intent_id in (ada, linus):
        bounced = intent(session_factory, intent_id)
        assert bounced.bounced_at is not None and bounced.bounce_type == "permanent"
    with session_factory() as session:
        suppressed = set(session.scalars(select(Suppression.recipient)))
    assert suppressed == {"ada@example.com", "linus@example.com"}


def test_a_bounce_for_neither_recipient_waits_unmatched_with_its_reason(
    session_factory, console_client
):
    ada = make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)
    linus = make_intent(session_factory, "linus@example.com", provider_id=REUSED_ID)

    [to_eve] = record(session_factory, bounce("eve@example.com"))

    waiting = event(session_factory, to_eve)
    assert (waiting.intent_id, waiting.matched_at) == (None, None)
    assert "eve@example.com" in waiting.unmatched_reason
    assert REUSED_ID in waiting.unmatched_reason
    assert all(intent(session_factory, i).bounced_at is None for i in (ada, linus))
    assert match_later(session_factory) == 0
    client = console_client("viewer")
    page = client.get(f"/events/{to_eve}")
    assert page.status_code == 200
    assert html.escape(waiting.unmatched_reason) in page.text
    listing = client.get("/events/unmatched")
    assert html.escape(waiting.unmatched_reason) in listing.text


def test_a_reused_id_is_not_matched_to_the_older_intent_before_the_new_one_has_it(
    session_factory,
):
    older = make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)
    newer = make_intent(session_factory, "linus@example.com")  # its T2 has not run yet

    [to_linus] = record(session_factory, bounce("linus@example.com"))

    waiting = event(session_factory, to_linus)
    assert waiting.intent_id is None and waiting.unmatched_reason
    assert intent(session_factory, older).bounced_at is None
    store_provider_id(session_factory, newer, REUSED_ID)
    assert match_later(session_factory) == 1
    matched = event(session_factory, to_linus)
    assert matched.intent_id == newer and matched.unmatched_reason is None
    assert intent(session_factory, newer).bounced_at is not None
    assert intent(session_factory, older).bounced_at is None


def test_later_matching_follows_the_same_rule(session_factory):
    ada = make_intent(session_factory, "ada@example.com")
    linus = make_intent(session_factory, "linus@example.com", on_attempt=True)
    to_ada, to_linus, to_eve = record(
        session_factory,
        bounce("ada@example.com"),
        bounce("linus@example.com"),
        bounce("eve@example.com"),
    )
    assert all(event(session_factory, e).intent_id is None for e in (to_ada, to_linus, to_eve))

    store_provider_id(session_factory, ada, REUSED_ID)
    with session_factory() as session:
        session.add(
            Attempt(
                intent_id=linus,
                attempt_number=1,
                lease_token="t",
                started_at=utcnow(),
                provider_message_id=REUSED_ID,
            )
        )
        session.commit()
    assert match_later(session_factory) == 2

    assert event(session_factory, to_ada).intent_id == ada
    assert event(session_factory, to_linus).intent_id == linus
    assert event(session_factory, to_linus).attempt_id is not None
    left = event(session_factory, to_eve)
    assert left.intent_id is None and "eve@example.com" in left.unmatched_reason
    assert match_later(session_factory) == 0


def test_one_recipient_with_two_intents_on_one_id_waits_unless_the_message_id_tells(
    session_factory,
):
    first = make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)
    second = make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)
    second_message_id = intent(session_factory, second).message_id

    undecided, decided = record(
        session_factory,
        bounce("ada@example.com"),
        bounce("ada@example.com", message_id=second_message_id),
    )

    waiting = event(session_factory, undecided)
    assert waiting.intent_id is None
    assert "2 intents" in waiting.unmatched_reason
    assert event(session_factory, decided).intent_id == second
    assert intent(session_factory, first).bounced_at is None
    assert match_later(session_factory) == 0


def test_a_message_id_of_another_recipient_is_never_matched(session_factory):
    ada = make_intent(session_factory, "ada@example.com", provider_id="relay-7")
    ada_message_id = intent(session_factory, ada).message_id

    [foreign] = record(
        session_factory, bounce("eve@example.com", provider_id=None, message_id=ada_message_id)
    )

    waiting = event(session_factory, foreign)
    assert waiting.intent_id is None and "eve@example.com" in waiting.unmatched_reason
    assert intent(session_factory, ada).bounced_at is None


def test_a_message_id_we_never_sent_is_not_matched_by_the_provider_id(session_factory):
    ada = make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)

    [other] = record(
        session_factory, bounce("ada@example.com", message_id="<not-ours@elsewhere.example>")
    )

    waiting = event(session_factory, other)
    assert waiting.intent_id is None and "Message-ID" in waiting.unmatched_reason
    assert intent(session_factory, ada).bounced_at is None


def test_an_event_naming_no_recipient_matches_only_a_single_intent(session_factory):
    single = make_intent(session_factory, "ada@example.com", provider_id="relay-1")
    make_intent(session_factory, "ada@example.com", provider_id=REUSED_ID)
    make_intent(session_factory, "linus@example.com", provider_id=REUSED_ID)

    found, undecided = record(
        session_factory,
        bounce(None, provider_id="relay-1", event_type="delivered"),
        bounce(None, event_type="delivered"),
    )

    assert event(session_factory, found).intent_id == single
    assert intent(session_factory, single).delivered_at is not None
    waiting = event(session_factory, undecided)
    assert waiting.intent_id is None and "2 intents" in waiting.unmatched_reason


def test_an_event_naming_no_message_waits_with_its_reason(session_factory):
    [nameless] = record(session_factory, bounce("ada@example.com", provider_id=None))
    assert "no provider id" in event(session_factory, nameless).unmatched_reason


# --- the servers hand out ids that do not repeat across restarts -------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def send_one(port: int, recipient: str) -> str:
    """Send one message to 127.0.0.1:`port`; return the server's reply to the body."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "shop@example.com", recipient, "Hi"
    message["Message-ID"] = f"<{uuid.uuid4().hex}@outbox.example>"
    message.set_content("Hello")
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.ehlo()
        client.mail("shop@example.com")
        client.rcpt(recipient)
        code, reply = client.data(message.as_bytes())
    assert code == 250
    return reply.decode()


def test_the_test_smtp_server_ids_do_not_repeat_across_restarts():
    ids = []
    for _ in range(2):
        with ScriptedSMTPServer() as server:
            send_one(server.port, "ada@example.com")
            send_one(server.port, "ada@example.com")
            ids += [r.queue_id for r in server.received]
    assert len(set(ids)) == 4
    assert all(queue_id.isalnum() and queue_id.isupper() for queue_id in ids)


def test_the_demo_capture_server_ids_do_not_repeat_across_restarts():
    replies = []
    for _ in range(2):
        port = free_port()
        server = DemoSMTPServer(port).start()
        try:
            replies.append(send_one(port, "ada@example.com"))
        finally:
            server.stop()
    queue_ids = [reply.rsplit(" ", 1)[1] for reply in replies]
    assert all(reply.startswith("2.0.0 Ok: queued as DEMO") for reply in replies)
    assert queue_ids[0] != queue_ids[1]
