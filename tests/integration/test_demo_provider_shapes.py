"""The demo's provider events: one in each provider's shape, matched, suppressing nobody."""

from __future__ import annotations

from console.demo.provider_shapes import SentMail, seed_provider_shapes
from console.models import Intent
from console.vocabulary import SUBMITTED
from tests.support.event_checks import all_events, load_intent, make_intent, suppression_map


def test_one_event_of_each_provider_is_seeded_once_and_matched(session_factory):
    ada = make_intent(session_factory, to="ada@example.com", provider_id="DEMO-EARLIER-991")
    grace = make_intent(session_factory, to="grace@example.com", provider_id="DEMO-EARLIER-U15")
    sent = []
    for intent_id in (ada, grace):
        intent: Intent = load_intent(session_factory, intent_id)
        sent.append(SentMail(intent.recipient, intent.provider_message_id, intent.message_id))
    with session_factory() as session:
        assert seed_provider_shapes(session, sent) == 5
        session.commit()
    with session_factory() as session:
        assert seed_provider_shapes(session, sent) == 0
        session.commit()
    events = all_events(session_factory)
    assert [e.source for e in events] == ["ses", "resend", "postmark", "mailgun", "sendgrid"]
    assert [e.event_type for e in events] == [
        "accepted", "delayed", "delivered", "delivered", "delivered"
    ]  # fmt: skip
    assert all(e.intent_id in (ada, grace) for e in events), [e.unmatched_reason for e in events]
    assert suppression_map(session_factory) == {}
    assert load_intent(session_factory, ada).status == SUBMITTED


def test_without_sent_mail_the_events_wait_unmatched(session_factory):
    with session_factory() as session:
        assert seed_provider_shapes(session, []) == 5
        session.commit()
    assert all(e.intent_id is None for e in all_events(session_factory))
