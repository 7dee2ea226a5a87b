"""Public SES payloads through POST /webhooks/ses, each with the effect it must have.

Each case (``tests/support/provider_payloads/ses_corpus*.py``, sources named
there) is re-signed by the test signer; a one-byte tampering is refused first,
then the genuine message is recorded once, and a redelivery changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import update

from console.models import Intent
from tests.support.event_checks import all_events, load_intent, make_intent, suppression_map
from tests.support.provider_fixtures import dispose, make_events_app, sns_signer
from tests.support.provider_payloads import ses_corpus, ses_corpus_events, ses_corpus_projects

CASES = ses_corpus.CASES + ses_corpus_events.CASES + ses_corpus_projects.CASES


@pytest.fixture
def client(db_url):
    app, _ = make_events_app(db_url)
    yield app.test_client()
    dispose(app)


def tampered(message: dict) -> dict:
    """The same signed message with one byte of its SES notification changed."""
    body = message["Message"]
    at = len(body) // 2
    changed = "x" if body[at] != "x" else "y"
    return {**message, "Message": body[:at] + changed + body[at + 1 :]}


def make_case_intents(session_factory, case) -> list[int]:
    ids = []
    for planned in case.intents:
        intent_id = make_intent(
            session_factory,
            to=planned.to,
            status="ambiguous",
            provider_id=planned.provider_id,
        )
        if planned.message_id:
            with session_factory() as session:
                session.execute(
                    update(Intent)
                    .where(Intent.id == intent_id)
                    .values(message_id=planned.message_id)
                )
                session.commit()
        ids.append(intent_id)
    return ids


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_public_ses_payload(client, session_factory, case):
    intent_ids = make_case_intents(session_factory, case)
    signed = sns_signer().notification(
        case.message, message_id=f"sns-{case.name}", timestamp=case.sns_timestamp
    )
    refused = client.post("/webhooks/ses", data=json.dumps(tampered(signed)))
    assert refused.status_code == 403 and all_events(session_factory) == []

    reply = client.post("/webhooks/ses", data=json.dumps(signed))
    assert reply.status_code == 200, reply.get_json()
    again = client.post("/webhooks/ses", data=json.dumps(signed)).get_json()
    assert (again["inserted"], again["duplicates"]) == (0, len(case.events))

    stored = all_events(session_factory)
    assert [(e.event_type, e.bounce_type, e.recipient) for e in stored] == list(case.events)
    assert all(e.occurred_at is not None for e in stored), "never the arrival time"
    if case.occurred_at:
        expected = dt.datetime.fromisoformat(case.occurred_at.replace("Z", "+00:00"))
        assert stored[0].occurred_at == expected
    for planned, intent_id in zip(case.intents, intent_ids, strict=True):
        intent = load_intent(session_factory, intent_id)
        assert intent.status == planned.status, planned.to
        set_facts = {fact for fact in ses_corpus.FACTS if getattr(intent, fact) is not None}
        assert set_facts == set(planned.facts), planned.to
    reasons = {s.recipient: s.reason for s in suppression_map(session_factory).values()}
    assert reasons == case.suppressed
    for event in stored:
        assert "content" not in (event.payload or {}), "inbound mail's content is not kept"
