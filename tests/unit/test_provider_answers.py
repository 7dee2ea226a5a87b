"""Each provider's answer reader on documented and strange answers: bounded, never raising."""

from __future__ import annotations

import json

import httpx
import pytest

from console.core.classify_http import MALFORMED_ANSWER, classify_http
from console.core.send_result import SendResult
from console.transports.answers import ProviderAnswer, Reply
from console.transports.http import ResendApi
from console.transports.mailgun import MailgunApi
from console.transports.postmark import PostmarkApi
from console.transports.sendgrid import SendGridApi
from console.transports.ses import SesApi
from console.vocabulary import AMBIGUOUS, REPLY_READ, TRANSIENT

APIS = {
    "resend": ResendApi("https://api.resend.com", "k"),
    "postmark": PostmarkApi("https://api.postmarkapp.com", "k"),
    "mailgun": MailgunApi("https://api.mailgun.net", "k", "mg.example.com"),
    "sendgrid": SendGridApi("https://api.sendgrid.com", "k"),
    "ses": SesApi("https://email.eu-west-1.amazonaws.com", "eu-west-1", credentials=None),
}


def reply(status, body: bytes | object = b"", complete=True, **headers) -> Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(status, httpx.Headers(headers), raw, complete)


# (provider, reply, expected answer); documented shapes first, then strange ones
ANSWERS = [
    (
        "resend",
        reply(200, {"id": "49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}),
        ProviderAnswer("49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"),
    ),
    (
        "resend",
        reply(422, {"statusCode": 422, "name": "validation_error", "message": "Bad to"}),
        ProviderAnswer(error_code="validation_error", message="Bad to"),
    ),
    (
        "postmark",
        reply(200, {"To": "a@b.c", "MessageID": "0a129aee", "ErrorCode": 0, "Message": "OK"}),
        ProviderAnswer("0a129aee"),
    ),
    (
        "postmark",
        reply(422, {"ErrorCode": 406, "Message": "You tried to send\nto inactive"}),
        ProviderAnswer(error_code="406", message="You tried to send to inactive"),
    ),
    (
        "postmark",
        reply(200, {"ErrorCode": 406, "Message": "inactive"}),
        ProviderAnswer(error_code="406", message="inactive"),
    ),
    (
        "postmark",
        reply(200, {"MessageID": 12, "ErrorCode": 0}),
        ProviderAnswer(message='{"MessageID": 12, "ErrorCode": 0}', malformed=True),
    ),
    ("postmark", reply(422, {"ErrorCode": True, "Message": ["x"]}), ProviderAnswer()),
    (
        "mailgun",
        reply(200, {"id": "<2011.5817@samples.mailgun.org>", "message": "Queued. Thank you."}),
        ProviderAnswer("2011.5817@samples.mailgun.org"),
    ),
    ("mailgun", reply(401, b"Forbidden"), ProviderAnswer(message="Forbidden")),
    (
        "mailgun",
        reply(200, {"id": "has a space"}),
        ProviderAnswer(message='{"id": "has a space"}', malformed=True),
    ),
    (
        "sendgrid",
        reply(202, **{"X-Message-Id": "Xuq0ZD8mQxqvRZ8_0dHJ4A"}),
        ProviderAnswer("Xuq0ZD8mQxqvRZ8_0dHJ4A"),
    ),
    (
        "sendgrid",
        reply(400, {"errors": [{"message": "a", "field": "x"}, {"message": "b"}, 7]}),
        ProviderAnswer(message="a; b"),
    ),
    ("sendgrid", reply(400, {"errors": "nope"}), ProviderAnswer(message='{"errors": "nope"}')),
    ("sendgrid", reply(202), ProviderAnswer(malformed=True)),
    ("ses", reply(200, {"MessageId": "0102018c-000000"}), ProviderAnswer("0102018c-000000")),
    (
        "ses",
        reply(
            400, {"message": "not verified"}, **{"x-amzn-ErrorType": "MessageRejected:http://x/"}
        ),
        ProviderAnswer(error_code="MessageRejected", message="not verified"),
    ),
    (
        "ses",
        reply(400, {"__type": "com.amazon#BadRequestException", "Message": "bad"}),
        ProviderAnswer(error_code="BadRequestException", message="bad"),
    ),
    ("ses", reply(500, b"<html>gateway</html>"), ProviderAnswer(message="<html>gateway</html>")),
    ("ses", reply(200, [1, 2]), ProviderAnswer(message="[1, 2]", malformed=True)),
    ("ses", reply(200, {"MessageId": "x" * 300}), None),  # too long an id: malformed
    ("resend", reply(200, b"[" * 100_000), None),  # nested past the parser's depth
    ("resend", reply(200, {"id": "ok"}, complete=False), None),  # cut at the cap
]


@pytest.mark.parametrize(
    "name, given, expected", ANSWERS, ids=[f"{a[0]}-{i}" for i, a in enumerate(ANSWERS)]
)
def test_answers(name, given, expected):
    answer = APIS[name].answer(given)
    if expected is None:
        assert answer.malformed and answer.provider_message_id is None
        assert answer.message is None or len(answer.message) <= 400
    else:
        assert answer == expected


def test_a_refusal_never_counts_as_malformed():
    for api in APIS.values():
        assert not api.answer(reply(503, b"\xff\xfe not text")).malformed


def resend(code, error_type=None, honoured=True) -> SendResult:
    return SendResult(
        REPLY_READ, "http", code=code, error_type=error_type, idempotency_honoured=honoured
    )


@pytest.mark.parametrize(
    "result, expected",
    [
        (resend(200, MALFORMED_ANSWER), TRANSIENT),  # a retry with the same key is safe
        (resend(200, MALFORMED_ANSWER, honoured=False), AMBIGUOUS),
        (resend(202, "validation_error"), "accepted"),  # a code on a 2xx is not a malformed body
    ],
)
def test_generic_http_rows_for_a_strange_success(result, expected):
    assert classify_http(result).outcome == expected
