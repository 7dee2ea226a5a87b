"""A lookup's answer settles a send only when it names our reference, our Message-ID or the
provider id we stored, whichever that provider returns, and no other reference; anything
else is "not found".

Postmark's message search carries its MessageID and our metadata, Mailgun's event log
the Message-ID header, its own id there and our user-variables, SendGrid's Email Activity
its msg_id (the X-Message-Id we stored, then ``.filter…``) and, in a message's details,
our custom args: none of them carries the others' fields.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from urllib.parse import unquote, urlsplit

import pytest

from console.core.asking import FOUND, NOT_FOUND, Question
from console.transports.answers import Reply
from console.transports.mailgun_lookup import MailgunLookupApi
from console.transports.postmark_lookup import PostmarkLookupApi
from console.transports.sendgrid_lookup import SendGridLookupApi
from tests.support.lookup_questions import OUR_REFERENCE, THEIR_REFERENCE, question_about

PM_STORED = "b7bc2f4a-e38e-4336-af7d-e6c392c2f817"  # Postmark's MessageID
MG_STORED = "20260520100000.1.ABCDEF@mg.example.com"  # Mailgun's id, without brackets
SG_STORED = "wrfRRvF7Q0GgwUo2CvDmEA"  # SendGrid's X-Message-Id
QUESTION = question_about()
OURS = OUR_REFERENCE
THEIRS = THEIR_REFERENCE
OTHER_ID = "0f0e1d2c-aaaa-4bbb-8ccc-123456789abc"


def reply(body: object, status: int = 200) -> Reply:
    return Reply(status, {}, json.dumps(body).encode(), True)


def asked(stored_id: str | None) -> Question:
    return dataclasses.replace(QUESTION, provider_message_id=stored_id)


def postmark(message_id: str, reference: str | None, stored_id: str | None = PM_STORED):
    message = {"MessageID": message_id, "Status": "Sent", "Metadata": None}
    if reference is not None:
        message["Metadata"] = {"outbox_ref": reference}
    api = PostmarkLookupApi("https://api.postmarkapp.com", "token")
    return api.finding(reply({"TotalCount": 1, "Messages": [message]}), asked(stored_id))


def mailgun(header_id: str, reference: str | None, stored_id: str | None = MG_STORED):
    item = {
        "id": "evt-1",
        "event": "accepted",
        "timestamp": 1779271200.0,
        "recipient": QUESTION.recipient,
        "message": {"headers": {"message-id": header_id, "to": QUESTION.recipient}},
        "user-variables": {"outbox_ref": reference} if reference else {},
    }
    api = MailgunLookupApi("https://api.mailgun.net", "key", "mg.example.com")
    return api.finding(reply({"items": [item]}), asked(stored_id))


def sendgrid(msg_id: str, reference: str | None, stored_id: str | None = SG_STORED):
    listed = {"msg_id": msg_id, "to_email": QUESTION.recipient, "status": "delivered"}
    unique_args = {"outbox_ref": reference} if reference else {}
    answers = {
        "/v3/messages": reply({"messages": [listed]}),
        f"/v3/messages/{msg_id}": reply({**listed, "unique_args": json.dumps(unique_args)}),
    }

    async def get(url, headers):
        return answers.get(unquote(urlsplit(url).path)) or reply({"errors": []}, 404)

    api = SendGridLookupApi("https://api.sendgrid.com", "SG.key")
    return asyncio.run(api.ask(get, asked(stored_id)))


CASES = [
    ("postmark: our reference", postmark, (OTHER_ID, OURS), FOUND),
    ("postmark: the stored provider id", postmark, (PM_STORED, None), FOUND),
    ("postmark: the stored id, another reference", postmark, (PM_STORED, THEIRS), NOT_FOUND),
    ("postmark: none of these", postmark, (OTHER_ID, THEIRS), NOT_FOUND),
    ("postmark: no metadata, another id", postmark, (OTHER_ID, None), NOT_FOUND),
    ("postmark: nothing stored", postmark, (PM_STORED, None, None), NOT_FOUND),
    ("mailgun: our reference", mailgun, ("20260520.9.X@mg.example.com", OURS), FOUND),
    ("mailgun: our Message-ID", mailgun, ("7.abc@shop.example.com", None), FOUND),
    ("mailgun: the stored provider id", mailgun, (MG_STORED, None), FOUND),
    ("mailgun: the stored id in brackets", mailgun, (f"<{MG_STORED}>", None), FOUND),
    (
        "mailgun: our Message-ID, another reference",
        mailgun,
        ("7.abc@shop.example.com", THEIRS),
        NOT_FOUND,
    ),
    ("mailgun: none of these", mailgun, ("8.other@shop.example.com", THEIRS), NOT_FOUND),
    ("mailgun: nothing stored", mailgun, (MG_STORED, None, None), NOT_FOUND),
    ("sendgrid: our reference", sendgrid, ("SOMEOTHERMSG.filter0001", OURS), FOUND),
    ("sendgrid: the stored id", sendgrid, (f"{SG_STORED}.filter0001.1", None), FOUND),
    ("sendgrid: the stored id, no route", sendgrid, (SG_STORED, None), FOUND),
    ("sendgrid: none of these", sendgrid, ("SOMEOTHERMSG.filter0001", THEIRS), NOT_FOUND),
    ("sendgrid: a longer id", sendgrid, (f"{SG_STORED}x.filter1", None), NOT_FOUND),
    ("sendgrid: nothing stored", sendgrid, (f"{SG_STORED}.filter1", None, None), NOT_FOUND),
]


@pytest.mark.parametrize(
    ("ask", "named", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_an_answer_settles_only_what_names_our_send(ask, named, expected):
    assert ask(*named).said == expected


def test_what_the_stored_id_finds_is_recorded_against_our_message():
    [event] = mailgun(MG_STORED, None).events
    assert (event.message_id, event.reference) == (QUESTION.message_id, OURS)
    [event] = sendgrid(f"{SG_STORED}.filter0001.1", None).events
    assert event.provider_message_id == SG_STORED
    assert (event.message_id, event.reference) == (QUESTION.message_id, OURS)
