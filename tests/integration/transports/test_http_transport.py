"""The HTTP provider transport against a real local HTTP server, and the HTTP classifier table."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import time
from email.utils import formatdate

import pytest

from console.core.classify import classify
from console.core.classify_http import classify_http
from console.core.send_result import SendResult
from console.transports.base import OutgoingEmail
from console.transports.http import HttpTransport, parse_retry_after
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CLAIMED,
    CONNECTING,
    DATA_SENT,
    PERMANENT,
    REPLY_READ,
    TRANSIENT,
)
from tests.support.provider_server import start_provider, stop_provider

API_KEY = "re_test_0123456789"
DAY_SECONDS = 24 * 3600.0
TIMEOUT_SECONDS = 0.5


@pytest.fixture
def provider():
    server = start_provider(API_KEY)
    yield server
    stop_provider(server)


def outgoing(*, key="order:1:confirmation", age_seconds=60.0, html="<p>Hi</p>") -> OutgoingEmail:
    return OutgoingEmail(
        intent_id=1,
        attempt_id=1,
        message_id="<abc123@outbox.localhost>",
        idempotency_key=key,
        mail_from="Shop <noreply@shop.example>",
        envelope_from="noreply@shop.example",
        recipient="ada@example.com",
        subject="Your order",
        text="Thanks",
        html=html,
        created_at_epoch=time.time() - age_seconds,
        as_bytes=lambda: b"",
    )


class Stages(list):
    """Records each stage the transport announces; can refuse one like a lost lease."""

    def __init__(self, refuse: str | None = None) -> None:
        super().__init__()
        self.refuse = refuse

    async def __call__(self, email: OutgoingEmail, stage: str) -> None:
        if stage == self.refuse:
            raise RuntimeError("the lease was taken back")
        self.append(stage)


def send(transport: HttpTransport, *emails: OutgoingEmail, stages=None) -> list[SendResult]:
    """Send `emails` one after another on one event loop, as a worker tick does."""

    async def run() -> list[SendResult]:
        try:
            return [
                await transport.send(e, stages if stages is not None else Stages()) for e in emails
            ]
        finally:
            await transport.close()

    return asyncio.run(run())


def transport_for(provider, *, key=API_KEY) -> HttpTransport:
    return HttpTransport(provider.base_url, key, timeout_seconds=TIMEOUT_SECONDS)


def outcome(result: SendResult, age_seconds: float = 60.0) -> str:
    return classify_http(result, intent_age_seconds=age_seconds).outcome


def test_accepted_send_carries_identity_and_returns_the_provider_id(provider):
    stages = Stages()
    [result] = send(transport_for(provider), outgoing(), stages=stages)
    [request] = provider.requests
    payload = json.loads(request["body"])
    assert (result.stage, result.code, result.protocol) == (REPLY_READ, 200, "http")
    assert result.provider_message_id == provider.sends["order:1:confirmation"]["id"]
    assert stages == [CONNECTING, DATA_SENT]
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert request["headers"]["Idempotency-Key"] == "order:1:confirmation"
    assert payload == {
        "from": "Shop <noreply@shop.example>",
        "to": ["ada@example.com"],
        "subject": "Your order",
        "text": "Thanks",
        "html": "<p>Hi</p>",
        "headers": {"Message-ID": "<abc123@outbox.localhost>"},
        "tags": [
            {"name": "outbox_ref", "value": "1-5f736c50d715"}
        ],  # intent 1, its Message-ID's check
    }
    assert outcome(result) == ACCEPTED and classify(result).outcome == ACCEPTED


def test_pooled_connection_announces_only_data_sent(provider):
    stages = Stages()
    send(transport_for(provider), outgoing(key="a"), outgoing(key="b"), stages=stages)
    assert stages == [CONNECTING, DATA_SENT, DATA_SENT]
    assert len(provider.sends) == 2


def test_accept_then_time_out_and_retry_sends_once(provider):
    provider.next("accept-hang")
    transport = transport_for(provider)
    first, retry = send(transport, outgoing(), outgoing())
    assert (first.stage, first.code, first.error_type) == (DATA_SENT, None, "ReadTimeout")
    assert first.idempotency_honoured
    assert outcome(first) == TRANSIENT and classify(first).outcome == TRANSIENT
    assert retry.code == 200 and outcome(retry) == ACCEPTED
    assert len(provider.requests) == 2
    assert len(provider.sends) == 1, "the provider saw one send"
    assert retry.provider_message_id == provider.sends["order:1:confirmation"]["id"]


def test_time_out_after_the_idempotency_window_is_ambiguous(provider):
    provider.next("accept-hang")
    old = outgoing(age_seconds=DAY_SECONDS + 60)
    [result] = send(transport_for(provider), old)
    assert result.stage == DATA_SENT and not result.idempotency_honoured
    assert outcome(result, DAY_SECONDS + 60) == AMBIGUOUS
    assert classify(result).outcome == AMBIGUOUS


def test_accepted_then_500_is_retried_safely(provider):
    provider.next("accept-500")
    first, retry = send(transport_for(provider), outgoing(), outgoing())
    assert first.code == 500 and outcome(first) == TRANSIENT
    assert retry.code == 200 and len(provider.sends) == 1


def test_reset_mid_response_is_an_unknown_outcome(provider):
    provider.next("reset")
    [result] = send(transport_for(provider), outgoing())
    assert result.stage == DATA_SENT and result.code is None and result.error_type
    assert outcome(result) == TRANSIENT
    assert outcome(result, DAY_SECONDS * 2) == AMBIGUOUS


@pytest.mark.parametrize("retry_after", ["7", "http-date"])
def test_429_is_transient_and_honours_retry_after(provider, retry_after):
    provider.next("429")
    if retry_after == "http-date":
        provider.retry_after = formatdate(time.time() + 120, usegmt=True)
    [result] = send(transport_for(provider), outgoing())
    verdict = classify_http(result, intent_age_seconds=60)
    assert (result.code, verdict.outcome) == (429, TRANSIENT)
    expected = 7.0 if retry_after == "7" else 120.0
    assert verdict.retry_after_seconds == pytest.approx(expected, abs=2)
    assert provider.sends == {}


def test_400_is_permanent_without_alert(provider):
    provider.next("400")
    [result] = send(transport_for(provider), outgoing())
    verdict = classify_http(result, intent_age_seconds=60)
    assert (result.code, verdict.outcome, verdict.alert) == (400, PERMANENT, False)
    assert "scripted 400" in verdict.reason


def test_wrong_key_is_401_permanent_and_alerts(provider):
    [result] = send(transport_for(provider, key="re_wrong"), outgoing())
    verdict = classify_http(result, intent_age_seconds=60)
    assert (result.code, verdict.outcome, verdict.alert) == (401, PERMANENT, True)
    assert provider.sends == {}


def test_missing_subject_is_422_permanent(provider):
    email = outgoing()
    [result] = send(transport_for(provider), email.__class__(**{**email.__dict__, "subject": ""}))
    assert (result.code, outcome(result)) == (422, PERMANENT)


def test_nothing_listening_is_transient_before_data_sent():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    stages = Stages()
    transport = HttpTransport(f"http://127.0.0.1:{closed_port}", API_KEY, timeout_seconds=1)
    [result] = send(transport, outgoing(), stages=stages)
    assert (result.stage, result.error_type) == (CONNECTING, "ConnectError")
    assert stages == [CONNECTING]
    assert outcome(result) == TRANSIENT and classify(result).outcome == TRANSIENT


def test_lost_lease_at_data_sent_sends_nothing(provider):
    stages = Stages(refuse=DATA_SENT)
    [result] = send(transport_for(provider), outgoing(), stages=stages)
    assert result.stage == CONNECTING and "lease" in result.error
    assert provider.requests == [] and stages == [CONNECTING]


def test_key_is_never_shown():
    assert API_KEY not in repr(HttpTransport("https://api.example.com", API_KEY))


def test_retry_after_parsing():
    now = 1_700_000_000.0
    assert parse_retry_after("30", now) == 30.0
    assert parse_retry_after(formatdate(now + 90, usegmt=True), now) == 90.0
    assert parse_retry_after(formatdate(now - 90, usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None and parse_retry_after(None, now) is None


def http(stage=REPLY_READ, code=None, honoured=True, retry_after=None, error=None) -> SendResult:
    return SendResult(
        stage=stage,
        protocol="http",
        code=code,
        error=error,
        retry_after_seconds=retry_after,
        idempotency_honoured=honoured,
    )


YOUNG, OLD = 3600.0, DAY_SECONDS + 1
# (row, result, intent age, outcome, alert, retry after)
CLASSIFY_ROWS = [
    ("200", http(code=200), YOUNG, ACCEPTED, False, None),
    ("202", http(code=202), OLD, ACCEPTED, False, None),
    ("429 retry-after", http(code=429, retry_after=30.0), YOUNG, TRANSIENT, False, 30.0),
    ("429 old intent", http(code=429, retry_after=30.0), OLD, TRANSIENT, False, 30.0),
    ("502", http(code=502), OLD, TRANSIENT, False, None),
    ("503 retry-after", http(code=503, retry_after=5.0), YOUNG, TRANSIENT, False, 5.0),
    ("504", http(code=504), YOUNG, TRANSIENT, False, None),
    ("connect error", http(CONNECTING, error="ConnectError"), OLD, TRANSIENT, False, None),
    ("not started", http(CLAIMED, error="lease lost"), OLD, TRANSIENT, False, None),
    ("400", http(code=400), YOUNG, PERMANENT, False, None),
    ("401", http(code=401), YOUNG, PERMANENT, True, None),
    ("403", http(code=403), YOUNG, PERMANENT, True, None),
    ("404", http(code=404), YOUNG, PERMANENT, False, None),
    ("422", http(code=422), YOUNG, PERMANENT, False, None),
    ("other 4xx", http(code=413), YOUNG, PERMANENT, True, None),
    ("3xx", http(code=302), YOUNG, PERMANENT, True, None),
    ("409 key in progress", http(code=409), YOUNG, TRANSIENT, False, None),
    ("409 old intent", http(code=409), OLD, PERMANENT, True, None),
    ("500 young", http(code=500), YOUNG, TRANSIENT, False, None),
    ("500 old", http(code=500), OLD, AMBIGUOUS, False, None),
    ("500 key not honoured", http(code=500, honoured=False), YOUNG, AMBIGUOUS, False, None),
    ("501 young", http(code=501), YOUNG, TRANSIENT, False, None),
    ("read timeout young", http(DATA_SENT, error="ReadTimeout"), YOUNG, TRANSIENT, False, None),
    ("read timeout old", http(DATA_SENT, error="ReadTimeout"), OLD, AMBIGUOUS, False, None),
    ("reset young", http(DATA_SENT, error="RemoteProtocolError"), YOUNG, TRANSIENT, False, None),
    ("reset old", http(DATA_SENT, error="RemoteProtocolError"), OLD, AMBIGUOUS, False, None),
    ("reset, no key", http(DATA_SENT, honoured=False), YOUNG, AMBIGUOUS, False, None),
    ("window edge", http(code=500), DAY_SECONDS, AMBIGUOUS, False, None),
]


@pytest.mark.parametrize(
    "result, age_seconds, expected, alert, retry_after",
    [row[1:] for row in CLASSIFY_ROWS],
    ids=[row[0] for row in CLASSIFY_ROWS],
)
def test_classify_http_table(result, age_seconds, expected, alert, retry_after):
    verdict = classify_http(result, intent_age_seconds=age_seconds)
    assert (verdict.outcome, verdict.alert, verdict.retry_after_seconds) == (
        expected,
        alert,
        retry_after,
    )
    assert verdict.reason


def test_window_is_configurable():
    result = http(code=500)
    assert classify_http(result, intent_age_seconds=120, idempotency_window_seconds=60).outcome == (
        AMBIGUOUS
    )
    assert classify_http(result, intent_age_seconds=30, idempotency_window_seconds=60).outcome == (
        TRANSIENT
    )


def test_transport_is_chosen_by_settings(tmp_path):
    from console.config import ConfigError, load_settings
    from console.transports.factory import make_transport

    base = {"CONSOLE_DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "CONSOLE_SECRET_KEY": "k" * 32}
    http_env = {
        **base,
        "CONSOLE_TRANSPORT": "http",
        "CONSOLE_HTTP_PROVIDER_URL": "https://api.example.com/",
        "CONSOLE_HTTP_PROVIDER_KEY": API_KEY,
        "CONSOLE_HTTP_IDEMPOTENCY_WINDOW_SECONDS": "3600",
    }
    transport = make_transport(load_settings(http_env, instance_path=tmp_path))
    assert isinstance(transport, HttpTransport)
    assert transport.endpoint == "https://api.example.com/emails"
    assert transport.idempotency_window_seconds == 3600.0
    smtp = make_transport(load_settings(base, instance_path=tmp_path))
    assert type(smtp).__name__ == "SmtpTransport"
    with pytest.raises(ConfigError, match="CONSOLE_HTTP_PROVIDER_KEY"):
        load_settings({**base, "CONSOLE_TRANSPORT": "http"}, instance_path=tmp_path)
    with pytest.raises(ConfigError, match="CONSOLE_TRANSPORT"):
        load_settings({**base, "CONSOLE_TRANSPORT": "carrier-pigeon"}, instance_path=tmp_path)


def test_worker_retries_an_unknown_outcome_once_and_matches_an_early_event(
    session_factory, provider, make_worker
):
    """Accept-then-time-out, a delivery event before the id is known, the retry, the match."""
    from sqlalchemy import select

    from console.events import ReportedEvent
    from console.models import Attempt, Intent, ProviderEvent, utcnow
    from console.outbox import enqueue
    from console.store.provider_events import record_events
    from console.vocabulary import PENDING, SUBMITTED

    # The ticks run up to an hour ahead; the worker's own clock (the claim-time
    # screen reads it: a login code lives 10 minutes) stays on the real time.
    worker = make_worker(transport_for(provider), clock=utcnow)
    with session_factory() as session:
        intent_id = enqueue(
            session,
            key="login:7",
            to="ada@example.com",
            template="login-code",
            params={"code": "7"},
        ).id
        session.commit()
    now = utcnow() + dt.timedelta(seconds=1)
    provider.next("accept-hang")
    worker.run_once(now)
    with session_factory() as session:
        assert session.get(Intent, intent_id).status == PENDING
        provider_id = provider.sends["login:7"]["id"]
        delivered = ReportedEvent(
            "webhook", "evt-1", "delivered", "ada@example.com", provider_message_id=provider_id
        )
        assert record_events(session, [delivered]).matched == 0
        session.commit()
    worker.run_once(now + dt.timedelta(hours=1))  # the retry, with the same key
    worker.run_once(now + dt.timedelta(hours=1, seconds=1))  # the next tick matches
    assert len(provider.requests) == 2 and len(provider.sends) == 1
    with session_factory() as session:
        intent = session.get(Intent, intent_id)
        attempts = session.scalars(select(Attempt).order_by(Attempt.id)).all()
        event = session.scalars(select(ProviderEvent)).one()
    assert intent.status == SUBMITTED and intent.provider_message_id == provider_id
    assert [a.outcome for a in attempts] == ["transient", "accepted"]
    assert event.intent_id == intent_id and intent.delivered_at is not None
