"""Recording SES events: dedupe, correlation, facts, suppression, reconciliation."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select, update

from console.events import ses
from console.models import Attempt, AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.outbox import enqueue
from console.store.provider_events import match_unmatched_events, record_events
from console.vocabulary import AMBIGUOUS, SUBMITTED
from tests.support.provider_fixtures import (
    bounce,
    complaint,
    delivery,
    dispose,
    make_events_app,
    ses_event,
    sns_signer,
)


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url)
    yield app.test_client()
    dispose(app)


def make_intent(session_factory, *, to="ada@example.com", status=SUBMITTED, provider_id=None):
    with session_factory() as session:
        intent = enqueue(
            session, key=str(uuid.uuid4()), to=to, template="login-code", params={"code": "1"}
        )
        session.flush()
        session.execute(
            update(Intent)
            .where(Intent.id == intent.id)
            .values(status=status, provider_message_id=provider_id)
        )
        session.commit()
        return intent.id


def deliver_sns(client, ses_message, **kwargs) -> dict:
    message = sns_signer().notification(ses_message, **kwargs)
    response = client.post("/webhooks/ses", data=json.dumps(message))
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def load(session_factory, intent_id) -> Intent:
    with session_factory() as session:
        return session.get(Intent, intent_id)


def events(session_factory) -> list[ProviderEvent]:
    with session_factory() as session:
        return list(session.scalars(select(ProviderEvent).order_by(ProviderEvent.id)))


def suppressions(session_factory) -> dict[str, Suppression]:
    with session_factory() as session:
        return {s.recipient: s for s in session.scalars(select(Suppression))}


def test_same_sns_message_twice_is_applied_once(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS, provider_id="ses-1")
    message = sns_signer().notification(bounce("ses-1", "Permanent", "ada@example.com"))
    replies = [client.post("/webhooks/ses", data=json.dumps(message)) for _ in range(2)]
    assert [r.status_code for r in replies] == [200, 200]
    assert [r.get_json()["inserted"] for r in replies] == [1, 0]
    assert replies[1].get_json()["duplicates"] == 1
    assert len(events(session_factory)) == 1
    assert list(suppressions(session_factory)) == ["ada@example.com"]
    with session_factory() as session:
        audit = session.scalars(select(AuditEntry).where(AuditEntry.intent_id == intent_id))
        assert len(list(audit)) == 1
    assert load(session_factory, intent_id).status == SUBMITTED


def test_delivery_then_bounce_keeps_both_facts(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-2")
    deliver_sns(client, delivery("ses-2", "ada@example.com"))
    delivered = load(session_factory, intent_id)
    assert delivered.delivered_at.isoformat() == "2025-01-31T12:00:03+00:00"
    assert delivered.bounced_at is None
    deliver_sns(client, bounce("ses-2", "Permanent", "ada@example.com"))
    both = load(session_factory, intent_id)
    assert both.delivered_at == delivered.delivered_at
    assert both.bounced_at.isoformat() == "2025-01-31T12:00:05+00:00"
    assert both.bounce_type == "permanent"
    assert both.bounce_diagnostic == "5.1.1 smtp; 550 5.1.1 user unknown"
    assert all(e.intent_id == intent_id for e in events(session_factory))


def test_multi_recipient_bounce_is_one_event_per_recipient(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-3")
    recipients = ("ada@example.com", "Bob@Example.com")
    reply = deliver_sns(client, bounce("ses-3", "Permanent", *recipients), message_id="sns-3")
    assert reply["inserted"] == 2
    stored = events(session_factory)
    assert [e.source_event_id for e in stored] == ["sns-3#1", "sns-3#2"]
    assert [e.recipient for e in stored] == list(recipients)
    assert stored[0].intent_id == intent_id
    assert stored[1].intent_id is None, "never attached to another recipient's intent"
    assert "Bob@Example.com" in stored[1].unmatched_reason
    assert set(suppressions(session_factory)) == {"ada@example.com", "bob@example.com"}
    by_recipient = {s.recipient: s.source_event_id for s in suppressions(session_factory).values()}
    assert by_recipient == {"ada@example.com": stored[0].id, "bob@example.com": stored[1].id}
    again = deliver_sns(client, bounce("ses-3", "Permanent", *recipients), message_id="sns-3")
    assert (again["inserted"], again["duplicates"]) == (0, 2)


def test_event_before_its_provider_id_waits_unmatched_then_matches(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS)
    reply = deliver_sns(client, delivery("ses-late", "ada@example.com"))
    assert (reply["inserted"], reply["matched"]) == (1, 0)
    [waiting] = events(session_factory)
    assert (waiting.intent_id, waiting.matched_at) == (None, None)
    assert load(session_factory, intent_id).delivered_at is None

    with session_factory() as session:  # the worker's T2 stores the provider id
        session.execute(
            update(Intent).where(Intent.id == intent_id).values(provider_message_id="ses-late")
        )
        assert match_unmatched_events(session) == 1
        session.commit()
    [matched] = events(session_factory)
    assert matched.intent_id == intent_id and matched.matched_at is not None
    intent = load(session_factory, intent_id)
    assert intent.delivered_at is not None and intent.status == SUBMITTED
    with session_factory() as session:
        assert match_unmatched_events(session) == 0


def test_unmatched_event_matches_through_the_attempts_provider_id(client, session_factory):
    intent_id = make_intent(session_factory)
    deliver_sns(client, bounce("ses-att", "Transient", "ada@example.com"))
    with session_factory() as session:
        attempt = Attempt(
            intent_id=intent_id,
            attempt_number=1,
            lease_token="t",
            started_at=utcnow(),
            provider_message_id="ses-att",
        )
        session.add(attempt)
        session.flush()
        assert match_unmatched_events(session) == 1
        session.commit()
    [event] = events(session_factory)
    assert (event.intent_id, event.attempt_id) == (intent_id, attempt.id)
    assert load(session_factory, intent_id).bounce_type == "transient"


def test_event_matched_by_message_id_teaches_the_provider_id(session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS)
    message_id = load(session_factory, intent_id).message_id
    notification = delivery("ses-hdr", "ada@example.com")
    notification["mail"]["headers"] = [{"name": "Message-ID", "value": message_id}]
    with session_factory() as session:
        record_events(session, ses.parse_notification("sns-hdr", json.dumps(notification)))
        session.commit()
    intent = load(session_factory, intent_id)
    assert intent.provider_message_id == "ses-hdr"
    assert intent.status == SUBMITTED and intent.delivered_at is not None


def test_transient_bounce_does_not_suppress(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-4")
    deliver_sns(client, bounce("ses-4", "Transient", "ada@example.com"))
    deliver_sns(client, bounce("ses-4", "Undetermined", "ada@example.com"))
    assert suppressions(session_factory) == {}
    intent = load(session_factory, intent_id)
    assert intent.bounced_at is not None and intent.bounce_type == "transient"


def test_permanent_bounce_suppresses_and_outranks_a_transient_one(client, session_factory):
    intent_id = make_intent(session_factory, to="Ada@Example.com", provider_id="ses-5")
    deliver_sns(client, bounce("ses-5", "Transient", "Ada@Example.com"))
    deliver_sns(client, bounce("ses-5", "Permanent", "Ada@Example.com", raw=True))
    assert load(session_factory, intent_id).bounce_type == "permanent"
    [entry] = suppressions(session_factory).values()
    permanent = events(session_factory)[1]
    assert (entry.recipient, entry.reason) == ("ada@example.com", "bounce")
    assert entry.source_event_id == permanent.id and permanent.bounce_type == "permanent"


def test_complaint_then_late_delivery_keeps_the_complaint(client, session_factory):
    intent_id = make_intent(session_factory, provider_id="ses-6")
    deliver_sns(client, bounce("ses-6", "Permanent", "ada@example.com"))
    deliver_sns(client, complaint("ses-6", "ada@example.com"))
    deliver_sns(client, delivery("ses-6", "ada@example.com", at="2025-01-31T13:00:00.000Z"))
    intent = load(session_factory, intent_id)
    assert intent.complained_at.isoformat() == "2025-01-31T12:10:00+00:00"
    assert intent.delivered_at.isoformat() == "2025-01-31T13:00:00+00:00"
    assert intent.bounce_type == "permanent"
    [entry] = suppressions(session_factory).values()
    assert entry.reason == "complaint"  # a complaint outranks the earlier bounce
    assert entry.source_event_id == events(session_factory)[1].id


def test_delivery_resolves_an_ambiguous_intent(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS, provider_id="ses-7")
    deliver_sns(client, delivery("ses-7", "ada@example.com"))
    intent = load(session_factory, intent_id)
    [event] = events(session_factory)
    assert intent.status == SUBMITTED and intent.submitted_at is not None
    assert f"provider event {event.id}" in intent.status_reason
    assert event.intent_id == intent_id
    with session_factory() as session:
        [audit] = session.scalars(select(AuditEntry))
    assert (audit.before_status, audit.after_status) == (AMBIGUOUS, SUBMITTED)
    assert audit.details == {"provider_event_id": event.id}


def test_unknown_event_types_are_stored_and_ignored(client, session_factory):
    intent_id = make_intent(session_factory, status=AMBIGUOUS, provider_id="ses-8")
    deliver_sns(client, ses_event("Open", "ses-8", open={"timestamp": "2025-01-31T12:30:00Z"}))
    deliver_sns(client, "Successfully validated SNS topic for Amazon SES event publishing.")
    stored = events(session_factory)
    assert [e.event_type for e in stored] == ["open", "unknown"]
    assert stored[0].intent_id == intent_id
    intent = load(session_factory, intent_id)
    assert intent.status == AMBIGUOUS and intent.delivered_at is None
    assert suppressions(session_factory) == {}


def test_rejected_request_changes_nothing(client, session_factory):
    make_intent(session_factory, provider_id="ses-9")
    message = sns_signer().notification(bounce("ses-9", "Permanent", "ada@example.com"))
    message["Message"] = message["Message"].replace("Permanent", "Transient")
    assert client.post("/webhooks/ses", data=json.dumps(message)).status_code == 403
    with session_factory() as session:
        assert session.scalar(select(func.count()).select_from(ProviderEvent)) == 0
    assert suppressions(session_factory) == {}
