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


def test_the_demo_reports_on_its_earlier_mail_in_every_provider_shape(session_factory):
    from console.demo import history
    from console.demo.provider_shapes import sent_mail

    with session_factory() as session:  # as `console demo` seeds, twice
        for _ in range(2):
            history.seed_history(session)
            earlier = sent_mail(session, history.PROVIDER_REPORTED_KEYS)
            assert [mail.recipient for mail in earlier] == [
                "ada@example.com", "margaret@example.com", "linus@example.com",
                "edsger@example.com", "barbara@example.com",
            ]  # fmt: skip
            seed_provider_shapes(session, earlier)
            session.commit()
    native = [e for e in all_events(session_factory) if e.source != "webhook"]
    assert sorted(e.source for e in native) == ["mailgun", "postmark", "resend", "sendgrid", "ses"]
    assert all(e.intent_id is not None for e in native), [e.unmatched_reason for e in native]
