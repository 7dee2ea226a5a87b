"""SendGrid's Email Activity lookup: the query it sends and how it reads the answer."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs, urlsplit

from console.core.asking import FAILED, FOUND, Question
from console.events.metadata import reference_for
from console.transports.answers import Reply
from console.transports.lookup_core import ProviderLookup
from console.transports.sendgrid_lookup import SendGridLookupApi
from tests.support.lookup_questions import question_about

QUESTION = question_about("ada@example.com")
API = SendGridLookupApi("https://api.sendgrid.com/", "SG.key")


def reply(body) -> Reply:
    return Reply(200, {}, json.dumps(body).encode(), True)


def test_the_query_names_our_reference_and_the_recipient():
    url, headers = API.request(QUESTION)
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    reference = reference_for(QUESTION.intent_id, QUESTION.message_id)
    assert parts.path == "/v3/messages" and query["limit"] == ["10"]
    assert query["query"] == [
        f'(unique_args[\'outbox_ref\']="{reference}") AND to_email="ada@example.com"'
    ]
    assert headers["Authorization"] == "Bearer SG.key"


def test_a_recipient_that_cannot_be_quoted_is_a_failed_lookup_not_a_request():
    odd = Question(**{**QUESTION.__dict__, "recipient": 'a"b@example.com'})
    lookup = ProviderLookup(SendGridLookupApi("http://127.0.0.1:9", "k"))
    try:
        assert lookup.ask(odd).said == FAILED
    finally:
        lookup.close()


def test_found_takes_the_x_message_id_from_the_activity_msg_id():
    msg_id = "abc123.filter0004p3las1-2776-5ACA5525-31.1"
    listed = {"msg_id": msg_id, "to_email": "ada@example.com", "status": "delivered"}
    reference = reference_for(QUESTION.intent_id, QUESTION.message_id)
    details = {**listed, "unique_args": json.dumps({"outbox_ref": reference})}
    answers = {
        "/v3/messages": reply({"messages": [listed]}),
        f"/v3/messages/{msg_id}": reply(details),
    }

    async def get(url, headers):
        return answers[urlsplit(url).path]

    finding = asyncio.run(API.ask(get, QUESTION))
    assert finding.said == FOUND
    [event] = finding.events
    assert event.provider_message_id == "abc123"
    assert event.other_provider_ids == (msg_id,)
    assert "settled by asking SendGrid" in event.diagnostic


def test_a_message_to_someone_else_or_an_odd_answer_is_not_ours():
    other = {"msg_id": "x.filter1", "to_email": "bob@example.com", "status": "delivered"}
    assert API.candidates(reply({"messages": [other, "junk", {}]}), QUESTION) == []
    assert API.candidates(reply({"messages": {"msg_id": "x"}}), QUESTION) is None
