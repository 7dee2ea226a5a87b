"""The native HTTP transports (Postmark, Mailgun, SendGrid, SES v2) against a real local server.

``tests/support/provider_apis.py`` plays each provider's send API with the shapes
its documentation gives; each test checks what our client sent and what the
provider's answer becomes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.credentials import Credentials

from console.core.blame import MESSAGE, RECIPIENT, SESSION, THROTTLING
from console.core.classify import classify
from console.core.classify_http import MALFORMED_ANSWER
from console.core.send_result import SendResult
from console.events.metadata import reference_for
from console.transports.base import OutgoingEmail
from console.transports.http_core import MAX_REPLY_TEXT, ProviderTransport
from console.transports.mailgun import MailgunApi
from console.transports.postmark import PostmarkApi
from console.transports.sendgrid import SendGridApi
from console.transports.ses import SesApi
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CONNECTING,
    DATA_SENT,
    PERMANENT,
    REPLY_READ,
    TRANSIENT,
)
from tests.support.provider_apis import (
    MAILGUN_DOMAIN,
    SES_ACCESS_KEY,
    SES_REGION,
    SES_SECRET_KEY,
    Role,
    mailgun_role,
    postmark_role,
    sendgrid_role,
    ses_role,
    start_apis,
    stop_apis,
)

TIMEOUT_SECONDS = 0.5
TOKEN = "server-token-0123"
MESSAGE_ID = "<abc123@outbox.localhost>"
REFERENCE = reference_for(7, MESSAGE_ID)


def outgoing(html: str | None = "<p>Hi</p>") -> OutgoingEmail:
    return OutgoingEmail(
        intent_id=7,
        attempt_id=1,
        message_id=MESSAGE_ID,
        idempotency_key="order:7:confirmation",
        mail_from="Shop <noreply@shop.example>",
        envelope_from="noreply@shop.example",
        recipient="ada@example.com",
        subject="Your order",
        text="Thanks",
        html=html,
        created_at_epoch=time.time() - 60,
        as_bytes=lambda: b"",
    )


def postmark_fields(email: OutgoingEmail) -> dict[str, Any]:
    return {
        "From": "Shop <noreply@shop.example>",
        "To": "ada@example.com",
        "Subject": "Your order",
        "TextBody": "Thanks",
        "HtmlBody": "<p>Hi</p>",
        "Headers": [{"Name": "Message-ID", "Value": MESSAGE_ID}],
        "Metadata": {"outbox_ref": REFERENCE},
        "MessageStream": "outbound",
    }


def mailgun_fields(email: OutgoingEmail) -> dict[str, Any]:
    return {
        "from": "Shop <noreply@shop.example>",
        "to": "ada@example.com",
        "subject": "Your order",
        "text": "Thanks",
        "html": "<p>Hi</p>",
        "h:Message-Id": MESSAGE_ID,
        "v:outbox_ref": REFERENCE,
    }


def sendgrid_fields(email: OutgoingEmail) -> dict[str, Any]:
    return {
        "personalizations": [{"to": [{"email": "ada@example.com"}]}],
        "from": {"email": "noreply@shop.example", "name": "Shop"},
        "subject": "Your order",
        "content": [
            {"type": "text/plain", "value": "Thanks"},
            {"type": "text/html", "value": "<p>Hi</p>"},
        ],
        "headers": {"Message-ID": MESSAGE_ID},
        "custom_args": {"outbox_ref": REFERENCE},
    }


def ses_fields(email: OutgoingEmail) -> dict[str, Any]:
    utf8 = "UTF-8"
    return {
        "FromEmailAddress": "Shop <noreply@shop.example>",
        "Destination": {"ToAddresses": ["ada@example.com"]},
        "Content": {
            "Simple": {
                "Subject": {"Data": "Your order", "Charset": utf8},
                "Body": {
                    "Text": {"Data": "Thanks", "Charset": utf8},
                    "Html": {"Data": "<p>Hi</p>", "Charset": utf8},
                },
            }
        },
        "EmailTags": [{"Name": "outbox_ref", "Value": REFERENCE}],
        "ConfigurationSetName": "outbox-events",
    }


def postmark_api(url: str, good: bool):
    return PostmarkApi(url, TOKEN if good else "wrong")


def mailgun_api(url: str, good: bool):
    return MailgunApi(url, TOKEN if good else "wrong", MAILGUN_DOMAIN)


def sendgrid_api(url: str, good: bool):
    return SendGridApi(url, TOKEN if good else "wrong")


def ses_api(url: str, good: bool):
    secret = SES_SECRET_KEY if good else "not-the-secret"
    credentials = Credentials(SES_ACCESS_KEY, secret)
    return SesApi(url, SES_REGION, credentials, configuration_set="outbox-events")


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    role: Callable[[], Role]
    api: Callable[[str, bool], Any]
    fields: Callable[[OutgoingEmail], dict[str, Any]]
    id_of: Callable[[str], str] = lambda provider_id: provider_id


CASES = [
    Case("postmark", lambda: postmark_role(TOKEN), postmark_api, postmark_fields),
    Case(
        "mailgun",
        lambda: mailgun_role(TOKEN),
        mailgun_api,
        mailgun_fields,
        lambda provider_id: provider_id.strip("<>"),
    ),
    Case("sendgrid", lambda: sendgrid_role(TOKEN), sendgrid_api, sendgrid_fields),
    Case("ses", ses_role, ses_api, ses_fields),
]


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
def case(request):
    return request.param


@pytest.fixture
def apis():
    server = start_apis(postmark_role(TOKEN), mailgun_role(TOKEN), sendgrid_role(TOKEN), ses_role())
    yield server
    stop_apis(server)


class Stages(list):
    """Records each stage announced; can refuse one (a lost lease) or take its time."""

    def __init__(self, refuse: str | None = None, on_data_sent=None) -> None:
        super().__init__()
        self.refuse = refuse
        self.on_data_sent = on_data_sent

    async def __call__(self, email: OutgoingEmail, stage: str) -> None:
        if stage == self.refuse:
            raise RuntimeError("the lease was taken back")
        if stage == DATA_SENT and self.on_data_sent is not None:
            await self.on_data_sent()
        self.append(stage)


def transport_for(case: Case, server, *, good: bool = True) -> ProviderTransport:
    return ProviderTransport(case.api(server.base_url, good), timeout_seconds=TIMEOUT_SECONDS)


def send(transport: ProviderTransport, *emails: OutgoingEmail, stages=None) -> list[SendResult]:
    async def run() -> list[SendResult]:
        try:
            return [
                await transport.send(e, stages if stages is not None else Stages()) for e in emails
            ]
        finally:
            await transport.close()

    return asyncio.run(run())


def test_accepted_send_carries_our_fields_and_returns_the_provider_id(case, apis):
    stages = Stages()
    [result] = send(transport_for(case, apis), outgoing(), stages=stages)
    role = apis.role(case.name)
    [sent] = role.sends
    assert (result.stage, result.protocol) == (REPLY_READ, f"http/{case.name}")
    assert result.provider_message_id == case.id_of(sent["id"])
    assert sent["fields"] == case.fields(outgoing())
    assert stages == [CONNECTING, DATA_SENT]
    assert not result.idempotency_honoured, "none of the four deduplicates a retry"
    assert classify(result).outcome == ACCEPTED


def test_a_text_only_email_sends_no_html(case, apis):
    send(transport_for(case, apis), outgoing(html=None))
    [sent] = apis.role(case.name).sends
    assert "<p>Hi</p>" not in json.dumps(sent["fields"])


def test_data_sent_is_stored_before_the_server_sees_the_request(case, apis):
    seen_during_mark = []

    async def slow_mark() -> None:
        await asyncio.sleep(0.2)  # the worker committing the mark
        seen_during_mark.append(apis.first_request_at is not None)

    [result] = send(transport_for(case, apis), outgoing(), stages=Stages(on_data_sent=slow_mark))
    assert seen_during_mark == [False]
    assert apis.first_request_at is not None and result.stage == REPLY_READ


def test_lost_lease_at_data_sent_sends_nothing(case, apis):
    stages = Stages(refuse=DATA_SENT)
    [result] = send(transport_for(case, apis), outgoing(), stages=stages)
    assert result.stage == CONNECTING and "lease" in result.error
    assert apis.requests == [] and classify(result).outcome == TRANSIENT


def test_wrong_credentials_pause_the_lane_and_alert(case, apis):
    [result] = send(transport_for(case, apis, good=False), outgoing())
    verdict = classify(result)
    assert (verdict.outcome, verdict.blamed, verdict.alert) == (TRANSIENT, SESSION, True)
    assert apis.role(case.name).sends == []


def test_429_is_throttling_and_honours_retry_after(case, apis):
    apis.next("429")
    [result] = send(transport_for(case, apis), outgoing())
    verdict = classify(result)
    assert (result.code, verdict.outcome, verdict.blamed) == (429, TRANSIENT, THROTTLING)
    assert verdict.retry_after_seconds == 7.0


@pytest.mark.parametrize("status, expected", [("500", AMBIGUOUS), ("503", TRANSIENT)])
def test_server_errors(case, apis, status, expected):
    apis.next(status)
    [result] = send(transport_for(case, apis), outgoing())
    assert (result.code, classify(result).outcome) == (int(status), expected)


@pytest.mark.parametrize("behaviour", ["accept-hang", "accept-reset"])
def test_no_answer_after_the_request_left_is_ambiguous(case, apis, behaviour):
    apis.next(behaviour)
    [result] = send(transport_for(case, apis), outgoing())
    assert (result.stage, result.code) == (DATA_SENT, None) and result.error_type
    assert classify(result).outcome == AMBIGUOUS
    assert len(apis.role(case.name).sends) == 1, "the provider has it"


@pytest.mark.parametrize("behaviour", ["malformed", "huge"])
def test_a_strange_success_is_ambiguous_and_bounded(case, apis, behaviour):
    apis.next(behaviour)
    [result] = send(transport_for(case, apis), outgoing())
    assert (result.code, result.error_type) == (200, MALFORMED_ANSWER)
    assert result.provider_message_id is None
    assert len(result.reply_text or "") <= MAX_REPLY_TEXT
    assert classify(result).outcome == AMBIGUOUS


def test_the_connection_is_reused_after_a_strange_answer(case, apis):
    apis.next("malformed")
    stages = Stages()
    first, second = send(transport_for(case, apis), outgoing(), outgoing(), stages=stages)
    assert first.error_type == MALFORMED_ANSWER and classify(second).outcome == ACCEPTED


# (provider, scripted documented error, outcome, blamed, alert)
DOCUMENTED_ERRORS = [
    ("postmark", "inactive-recipient", PERMANENT, RECIPIENT, False),
    ("postmark", "invalid-request", PERMANENT, MESSAGE, False),
    ("postmark", "out-of-credits", TRANSIENT, SESSION, True),
    ("mailgun", "bad-parameter", PERMANENT, MESSAGE, False),
    ("mailgun", "forbidden", TRANSIENT, SESSION, True),
    ("sendgrid", "bad-request", PERMANENT, MESSAGE, False),
    ("sendgrid", "unverified-sender", TRANSIENT, SESSION, True),
    ("sendgrid", "too-large", PERMANENT, MESSAGE, False),
    ("ses", "message-rejected", PERMANENT, MESSAGE, False),
    ("ses", "sending-paused", TRANSIENT, SESSION, True),
]


@pytest.mark.parametrize(
    "name, behaviour, expected, blamed, alert",
    DOCUMENTED_ERRORS,
    ids=[f"{row[0]}-{row[1]}" for row in DOCUMENTED_ERRORS],
)
def test_documented_errors(apis, name, behaviour, expected, blamed, alert):
    case = next(c for c in CASES if c.name == name)
    apis.next(behaviour)
    [result] = send(transport_for(case, apis), outgoing())
    verdict = classify(result)
    assert (verdict.outcome, verdict.blamed, verdict.alert) == (expected, blamed, alert)
    assert result.reply_text[:40] in verdict.reason, "the provider's words reach the timeline"


def test_the_provider_code_and_words_reach_the_reply_text(apis):
    case = next(c for c in CASES if c.name == "postmark")
    apis.next("inactive-recipient")
    [result] = send(transport_for(case, apis), outgoing())
    assert (result.code, result.error_type) == (422, "406")
    assert result.reply_text.startswith("406: You tried to send to recipient(s)")


def test_ses_error_type_comes_from_the_header(apis):
    case = next(c for c in CASES if c.name == "ses")
    apis.next("message-rejected")
    [result] = send(transport_for(case, apis), outgoing())
    assert (result.code, result.error_type) == (400, "MessageRejected")
    assert "Email address is not verified" in result.reply_text


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_worker_stores_the_provider_id_and_holds_an_unknown_outcome(
    session_factory, apis, make_worker, case
):
    """An accepted send keeps the provider's id; a send with no answer waits as ambiguous."""
    from console.models import Intent, utcnow
    from console.outbox import enqueue
    from console.vocabulary import SUBMITTED

    worker = make_worker(transport_for(case, apis), clock=utcnow)
    params = {"name": "Bob", "login_url": "https://shop.example.com/login"}
    with session_factory() as session:
        sent, unknown = (
            enqueue(session, key=key, to="ada@example.com", template="welcome", params=params).id
            for key in ("welcome:1", "welcome:2")
        )
        session.commit()
    apis.next("ok", "accept-hang")
    worker.run_once(utcnow() + dt.timedelta(seconds=1))
    role = apis.role(case.name)
    with session_factory() as session:
        accepted, held = session.get(Intent, sent), session.get(Intent, unknown)
        assert (accepted.status, held.status) == (SUBMITTED, AMBIGUOUS)
        assert accepted.provider_message_id == case.id_of(role.sends[0]["id"])
    assert len(role.sends) == 2
