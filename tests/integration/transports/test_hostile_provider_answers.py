"""Hostile provider answers, per provider, in a batch of four: only the one answered is touched.

A real HTTP server on 127.0.0.1 answers each of the five HTTP transports as its
provider documents, except for one recipient, whom it answers with raw bytes:
odd ``Retry-After`` values, numbers of any size, wrong content types, cut or
non-UTF-8 JSON, an id of 10 KB, duplicate headers, a success with an error
inside. The worker sends the four in one tick; the other three are recorded
exactly as in a batch with no hostile answer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.credentials import Credentials
from sqlalchemy import select

from console.models import Attempt, Intent, utcnow
from console.outbox import enqueue
from console.transports.http import HttpTransport
from console.transports.http_core import ProviderTransport
from console.transports.mailgun import MailgunApi
from console.transports.postmark import PostmarkApi
from console.transports.sendgrid import SendGridApi
from console.transports.ses import SesApi
from console.vocabulary import AMBIGUOUS, FAILED, PENDING, SUBMITTED
from tests.support.workers import BACKOFF

HOSTILE = "hostile@example.com"
NEIGHBOURS = ("n1@example.com", "n3@example.com", "n4@example.com")
_RECIPIENT = re.compile(rb"(n[0-9]|hostile)(?:%40|@)example\.com")
_REFERENCE = re.compile(rb"[0-9]+-[0-9a-f]{6,}")
BIG_ID = "x" * 10_240


def raw(status: int, body: bytes = b"", *headers: str, length: int | None = None) -> bytes:
    """One HTTP/1.1 answer, byte for byte, headers as given (duplicates and all)."""
    lines = [f"HTTP/1.1 {status} Whatever", *headers, f"Content-Length: {length or len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


JSON = "Content-Type: application/json"


@dataclasses.dataclass(frozen=True)
class Provider:
    name: str
    path: str
    accepted: object  # provider id -> raw answer

    def transport(self, base_url: str):
        options = {"timeout_seconds": 5.0}
        if self.name == "resend":
            return HttpTransport(base_url, "re_key", **options)
        apis = {
            "postmark": lambda: PostmarkApi(base_url, "token"),
            "mailgun": lambda: MailgunApi(base_url, "key", "mg.example.com"),
            "sendgrid": lambda: SendGridApi(base_url, "SG.key"),
            "ses": lambda: SesApi(base_url, "eu-west-1", Credentials("AKID", "SECRET")),
        }
        return ProviderTransport(apis[self.name](), **options)


def _json_answer(status: int, body: dict) -> bytes:
    return raw(status, json.dumps(body).encode(), JSON)


PROVIDERS = {
    "resend": Provider("resend", "/emails", lambda pid: _json_answer(200, {"id": pid})),
    "postmark": Provider(
        "postmark",
        "/email",
        lambda pid: _json_answer(200, {"MessageID": pid, "ErrorCode": 0, "Message": "OK"}),
    ),
    "mailgun": Provider(
        "mailgun",
        "/v3/mg.example.com/messages",
        lambda pid: _json_answer(200, {"id": f"<{pid}>", "message": "Queued. Thank you."}),
    ),
    "sendgrid": Provider(
        "sendgrid", "/v3/mail/send", lambda pid: raw(202, b"", f"X-Message-Id: {pid}")
    ),
    "ses": Provider(
        "ses", "/v2/email/outbound-emails", lambda pid: _json_answer(200, {"MessageId": pid})
    ),
}
ID_FIELD = {"resend": "id", "postmark": "MessageID", "mailgun": "id", "ses": "MessageId"}
UNKNOWN = "unknown"  # ambiguous, or pending where a retry with the same key is safe (Resend)
THROTTLED = "throttled"  # pending, no later than the retry cap


def common_answers() -> list[tuple[str, bytes, str]]:
    """Hostile answers every provider may give, and what each must become."""
    return [
        ("retry-after superscript", raw(429, b"{}", JSON, "Retry-After: \u00b2"), THROTTLED),
        ("retry-after 400 nines", raw(429, b"{}", JSON, "Retry-After: " + "9" * 400), THROTTLED),
        ("retry-after year 5195", raw(429, b"{}", JSON, "Retry-After: 99999999999"), THROTTLED),
        (
            "retry-after twice",
            raw(429, b"{}", JSON, "Retry-After: 5", "Retry-After: 99999999999"),
            THROTTLED,
        ),
        ("retry-after odd date", raw(503, b"", "Retry-After: Mon, 99 Foo 99999"), THROTTLED),
        ("html success", raw(200, b"<html>ok</html>", "Content-Type: text/html"), UNKNOWN),
        ("truncated json", raw(200, b'{"id": "abc', JSON), UNKNOWN),
        ("non-utf-8 json", raw(200, b'{"id": "\xff\xfe\xfa"}', JSON), UNKNOWN),
        ("infinite number", raw(200, b'{"id": 1e999, "MessageID": 1e999}', JSON), UNKNOWN),
        ("deep json", raw(200, b"[" * 100_000 + b"]" * 100_000, JSON), UNKNOWN),
        ("cut short", raw(200, b'{"id": "ab', JSON, length=500), UNKNOWN),
        ("500 non-utf-8", raw(500, b"\xff\xfe oops", "Content-Type: text/plain"), UNKNOWN),
    ]


def own_answers(provider: str) -> list[tuple[str, bytes, str]]:
    """The hostile answers in this provider's own shape: a 10 KB id, an error in a success."""
    if provider == "sendgrid":
        errors = json.dumps({"errors": [{"message": "bad"}]}).encode()
        return [
            ("10 KB id", raw(202, b"", f"X-Message-Id: {BIG_ID}"), UNKNOWN),
            ("two ids", raw(202, b"", "X-Message-Id: aaa", "X-Message-Id: bbb"), UNKNOWN),
            ("error in a success", raw(202, errors, JSON), UNKNOWN),
        ]
    field = ID_FIELD[provider]
    answers = [("10 KB id", _json_answer(200, {field: BIG_ID}), UNKNOWN)]
    inside = {
        "resend": ({"statusCode": 422, "name": "validation_error", "message": "x"}, UNKNOWN),
        "postmark": ({"ErrorCode": 406, "Message": "Inactive recipient"}, FAILED),
        "mailgun": ({"message": "Domain not found"}, UNKNOWN),
        "ses": ({"__type": "MessageRejected", "message": "Email address is not verified"}, UNKNOWN),
    }[provider]
    answers.append(("error in a success", _json_answer(200, inside[0]), inside[1]))
    return answers


CASES = [
    pytest.param(provider, answer, expected, id=f"{provider}-{name}")
    for provider in PROVIDERS
    for name, answer, expected in common_answers() + own_answers(provider)
]


class HostileServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, provider: Provider) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.provider = provider
        self.hostile_answer: bytes | None = None
        self.given_ids: dict[str, str] = {}  # recipient -> the id it was answered with
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address) -> None:
        """A client that gave up on a hostile answer is expected here."""


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        who = _RECIPIENT.search(body)
        recipient = who.group(1).decode() + "@example.com" if who else "?"
        if recipient == HOSTILE and self.server.hostile_answer is not None:
            self.close_connection = True
            self.wfile.write(self.server.hostile_answer)
            return
        reference = _REFERENCE.search(body)
        provider_id = "pid" + hashlib.sha256(reference.group(0)).hexdigest()[:16]
        with self.server.lock:
            self.server.given_ids[recipient] = provider_id
        self.wfile.write(self.server.provider.accepted(provider_id))


@pytest.fixture
def hostile_server(request):
    server = HostileServer(PROVIDERS[request.param])
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def backend() -> str:
    """SQLite only: the answer is what varies here, not the database."""
    return "sqlite"


PARAMS = {"name": "Bob", "login_url": "https://shop.example.com/login"}


def send_batch(session_factory, worker, batch: str, recipients) -> dict[str, int]:
    """Enqueue one intent per recipient, run one tick; their ids by recipient."""
    with session_factory() as session:
        ids = {
            to: enqueue(session, key=f"{batch}:{n}", to=to, template="welcome", params=PARAMS).id
            for n, to in enumerate(recipients)
        }
        session.commit()
    worker.run_once(utcnow() + dt.timedelta(seconds=1))
    return ids


def recorded(session_factory, intent_id: int, given_ids: dict[str, str]) -> dict:
    """What the database holds of one intent's send, its ids replaced by their roles."""
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        attempts = session.scalars(select(Attempt).where(Attempt.intent_id == intent_id)).all()
        return {
            "status": intent.status,
            "attempt_count": intent.attempt_count,
            "given_id": intent.provider_message_id == given_ids.get(intent.recipient),
            "attempts": [(a.stage, a.outcome, a.reply_code, bool(a.finished_at)) for a in attempts],
        }


@pytest.mark.parametrize(
    ("hostile_server", "answer", "expected"), CASES, indirect=["hostile_server"]
)
def test_a_hostile_answer_touches_only_its_own_send(
    session_factory, make_worker, hostile_server, answer, expected
):
    worker = make_worker(
        hostile_server.provider.transport(hostile_server.base_url), clock=utcnow, concurrency=4
    )
    calm = send_batch(session_factory, worker, "calm", [NEIGHBOURS[0], HOSTILE, *NEIGHBOURS[1:]])
    given = dict(hostile_server.given_ids)
    baseline = {to: recorded(session_factory, calm[to], given) for to in NEIGHBOURS}
    assert all(row["status"] == SUBMITTED and row["given_id"] for row in baseline.values())

    hostile_server.hostile_answer = answer
    hostile_server.given_ids.clear()
    before = utcnow()
    ids = send_batch(session_factory, worker, "hostile", [NEIGHBOURS[0], HOSTILE, *NEIGHBOURS[1:]])
    given = dict(hostile_server.given_ids)
    assert {to: recorded(session_factory, ids[to], given) for to in NEIGHBOURS} == baseline
    check_hostile_outcome(
        session_factory, ids[HOSTILE], hostile_server.provider.name, expected, before
    )


def check_hostile_outcome(session_factory, intent_id, provider, expected, before) -> None:
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        [attempt] = session.scalars(select(Attempt).where(Attempt.intent_id == intent_id)).all()
        assert attempt.finished_at is not None and attempt.outcome is not None
        assert intent.provider_message_id is None
        if expected == THROTTLED:
            assert intent.status == PENDING
            cap = dt.timedelta(seconds=BACKOFF.cap_seconds + 5)
            assert intent.next_attempt_at <= before + cap
        elif expected == UNKNOWN:
            assert intent.status == (PENDING if provider == "resend" else AMBIGUOUS)
        else:
            assert intent.status == expected


@pytest.mark.parametrize("hostile_server", ["postmark"], indirect=True)
def test_a_reader_that_fails_on_an_answer_leaves_that_send_ambiguous_and_no_other(
    session_factory, make_worker, hostile_server, monkeypatch
):
    """Any exception while reading one answer is that send's: the request left, so ambiguous."""
    read = PostmarkApi.answer

    def fragile(self, reply):
        if b"boom" in reply.body:
            raise KeyError("boom")
        return read(self, reply)

    monkeypatch.setattr(PostmarkApi, "answer", fragile)
    worker = make_worker(
        hostile_server.provider.transport(hostile_server.base_url), clock=utcnow, concurrency=4
    )
    hostile_server.hostile_answer = _json_answer(200, {"boom": True})
    ids = send_batch(session_factory, worker, "fragile", [NEIGHBOURS[0], HOSTILE, *NEIGHBOURS[1:]])
    given = dict(hostile_server.given_ids)
    for to in NEIGHBOURS:
        assert recorded(session_factory, ids[to], given)["status"] == SUBMITTED
    with session_factory() as session:
        assert session.get(Intent, ids[HOSTILE]).status == AMBIGUOUS
