"""A lookup settles only what is provably ours: each answer checked in our code, per provider.

A real HTTP server on 127.0.0.1 answers each lookup request with a canned body
by path (and 404 for a path it was given none for), as a provider that ignored
our query's filter would.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.core.asking import FOUND, NOT_FOUND
from console.transports.lookup_core import ProviderLookup
from console.transports.mailgun_lookup import MailgunLookupApi
from console.transports.postmark_lookup import PostmarkLookupApi
from console.transports.sendgrid_lookup import SendGridLookupApi
from tests.support.lookup_questions import OUR_REFERENCE, THEIR_REFERENCE, question_about

QUESTION = question_about()
OURS = OUR_REFERENCE
THEIRS = THEIR_REFERENCE
SG_LIST = "/v3/messages"
OTHER_MSG = {"msg_id": "SOMEOTHERMSG.filter0001", "to_email": "amb@example.com"}


class CannedLookups(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answers: dict[str, object]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: CannedLookups
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - the http.server naming
        path = self.path.partition("?")[0]
        answer = self.server.answers.get(path)
        status, body = (404, b'{"errors": []}') if answer is None else (200, json.dumps(answer))
        body = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def ask(api_for, answers: dict[str, object]):
    server = CannedLookups(answers)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    lookup = ProviderLookup(api_for(server.base_url), timeout_seconds=5.0)
    try:
        return lookup.ask(QUESTION)
    finally:
        lookup.close()
        server.shutdown()
        server.server_close()


def sendgrid(base_url):
    return SendGridLookupApi(base_url, "SG.key")


def postmark(base_url):
    return PostmarkLookupApi(base_url, "token")


def mailgun(base_url):
    return MailgunLookupApi(base_url, "key", "mg.example.com")


def sg_detail(msg_id: str, unique_args) -> dict:
    return {**OTHER_MSG, "msg_id": msg_id, "status": "delivered", "unique_args": unique_args}


def pm_message(metadata) -> dict:
    return {
        "MessageID": "b7bc2f4a-e38e-4336-af7d-e6c392c2f817",
        "Status": "Sent",
        "Metadata": metadata,
    }


def mg_item(message_id: str, reference: str) -> dict:
    return {
        "id": "evt-1",
        "event": "accepted",
        "timestamp": 1779271200.0,
        "recipient": "amb@example.com",
        "message": {"headers": {"message-id": message_id, "to": "amb@example.com"}},
        "user-variables": {"outbox_ref": reference},
    }


def detail_path(msg_id: str) -> str:
    return f"{SG_LIST}/{msg_id}"


MG_EVENTS = "/v3/mg.example.com/events"
CASES = [
    (
        "sendgrid: recipient alone",
        sendgrid,
        {SG_LIST: {"messages": [{**OTHER_MSG, "status": "delivered"}]}},
        NOT_FOUND,
    ),
    (
        "sendgrid: details name another reference",
        sendgrid,
        {
            SG_LIST: {"messages": [OTHER_MSG]},
            detail_path(OTHER_MSG["msg_id"]): sg_detail(
                OTHER_MSG["msg_id"], json.dumps({"outbox_ref": THEIRS})
            ),
        },
        NOT_FOUND,
    ),
    (
        "sendgrid: details with no custom args",
        sendgrid,
        {
            SG_LIST: {"messages": [OTHER_MSG]},
            detail_path(OTHER_MSG["msg_id"]): sg_detail(OTHER_MSG["msg_id"], None),
        },
        NOT_FOUND,
    ),
    (
        "sendgrid: details name another message than asked",
        sendgrid,
        {
            SG_LIST: {"messages": [OTHER_MSG]},
            detail_path(OTHER_MSG["msg_id"]): sg_detail("X.filter9", {"outbox_ref": OURS}),
        },
        NOT_FOUND,
    ),
    (
        "sendgrid: details name our reference",
        sendgrid,
        {
            SG_LIST: {"messages": [OTHER_MSG]},
            detail_path(OTHER_MSG["msg_id"]): sg_detail(
                OTHER_MSG["msg_id"], json.dumps({"outbox_ref": OURS})
            ),
        },
        FOUND,
    ),
    (
        "postmark: another reference",
        postmark,
        {"/messages/outbound": {"TotalCount": 1, "Messages": [pm_message({"outbox_ref": THEIRS})]}},
        NOT_FOUND,
    ),
    (
        "postmark: no metadata",
        postmark,
        {"/messages/outbound": {"TotalCount": 1, "Messages": [pm_message(None)]}},
        NOT_FOUND,
    ),
    (
        "postmark: our reference",
        postmark,
        {"/messages/outbound": {"TotalCount": 1, "Messages": [pm_message({"outbox_ref": OURS})]}},
        FOUND,
    ),
    (
        "mailgun: another message-id and reference",
        mailgun,
        {MG_EVENTS: {"items": [mg_item("8.other@shop.example.com", THEIRS)]}},
        NOT_FOUND,
    ),
    (
        "mailgun: our message-id",
        mailgun,
        {MG_EVENTS: {"items": [mg_item("7.abc@shop.example.com", OURS)]}},
        FOUND,
    ),
]


@pytest.mark.parametrize(
    ("api_for", "answers", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_only_an_answer_naming_our_send_settles_it(api_for, answers, expected):
    assert ask(api_for, answers).said == expected


def test_the_sendgrid_message_found_is_the_one_its_details_confirm():
    msg_id = OTHER_MSG["msg_id"]
    finding = ask(
        sendgrid,
        {
            SG_LIST: {"messages": [OTHER_MSG]},
            detail_path(msg_id): sg_detail(msg_id, {"outbox_ref": OURS}),
        },
    )
    [event] = finding.events
    assert (event.provider_message_id, event.reference) == ("SOMEOTHERMSG", OURS)
