"""classify(): every SMTP and HTTP reply at every stage, and every error aiosmtplib raises."""

from __future__ import annotations

import aiosmtplib
import pytest

from console.config import ConfigError, load_settings
from console.core.classify import RENDER_ERROR, classify, enhanced_status_of, parse_overrides
from console.core.send_result import SendResult
from console.transports.smtp import describe_failure, provider_id_from_reply
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CLAIMED,
    CONNECTING,
    DATA_SENT,
    ENVELOPE,
    PERMANENT,
    REPLY_READ,
    TRANSIENT,
)


def smtp(stage, code=None, text=None, error_type=None):
    return SendResult(stage=stage, code=code, reply_text=text, error_type=error_type)


def http(stage, code=None, idempotent=False, retry_after=None):
    return SendResult(
        stage=stage,
        code=code,
        protocol="http",
        idempotency_honoured=idempotent,
        retry_after_seconds=retry_after,
    )


# (reply at a stage, result, expected outcome)
SMTP_ROWS = [
    ("2yz after the final dot", smtp(REPLY_READ, 250, "2.0.0 Ok: queued as X1"), ACCEPTED),
    ("421 at greeting", smtp(CONNECTING, 421, "4.7.0 closing"), TRANSIENT),
    ("421 after the body", smtp(DATA_SENT, 421, "4.7.0 closing"), TRANSIENT),
    ("450 at RCPT", smtp(ENVELOPE, 450, "4.2.0 busy"), TRANSIENT),
    ("451 after the body", smtp(DATA_SENT, 451, "4.3.0 local error"), TRANSIENT),
    ("452 at MAIL", smtp(ENVELOPE, 452, "4.3.1 storage"), TRANSIENT),
    ("550 5.1.1 at RCPT", smtp(ENVELOPE, 550, "5.1.1 user unknown"), PERMANENT),
    ("553 after the body", smtp(DATA_SENT, 553, "5.1.3 bad address"), PERMANENT),
    ("554 after the body", smtp(DATA_SENT, 554, "5.7.1 rejected"), PERMANENT),
    ("5yz at greeting/AUTH: the relay, not the recipient", smtp(CONNECTING, 535), TRANSIENT),
    ("refused connection", smtp(CONNECTING, error_type="SMTPConnectError"), TRANSIENT),
    ("DNS failure", smtp(CONNECTING, error_type="gaierror"), TRANSIENT),
    ("TLS handshake failure", smtp(CONNECTING, error_type="SSLError"), TRANSIENT),
    ("timeout before DATA", smtp(ENVELOPE, error_type="SMTPReadTimeoutError"), TRANSIENT),
    ("dropped after the body", smtp(DATA_SENT, error_type="SMTPServerDisconnected"), AMBIGUOUS),
    ("timeout after the body", smtp(DATA_SENT, error_type="SMTPReadTimeoutError"), AMBIGUOUS),
    ("message could not be built", smtp(CLAIMED, error_type=RENDER_ERROR), PERMANENT),
]

HTTP_ROWS = [
    ("HTTP 2xx", http(REPLY_READ, 202), ACCEPTED),
    *[(f"HTTP {code}", http(REPLY_READ, code), TRANSIENT) for code in (429, 502, 503, 504)],
    ("connect error before the request", http(CONNECTING), TRANSIENT),
    *[(f"HTTP {code}", http(REPLY_READ, code), PERMANENT) for code in (400, 401, 403, 404, 422)],
    ("HTTP 500", http(REPLY_READ, 500), AMBIGUOUS),
    ("read timeout after the request", http(DATA_SENT), AMBIGUOUS),
    ("HTTP 500 with an honoured idempotency key", http(REPLY_READ, 500, True), TRANSIENT),
    ("read timeout with an honoured idempotency key", http(DATA_SENT, None, True), TRANSIENT),
]


@pytest.mark.parametrize(
    "row,result,expected", SMTP_ROWS + HTTP_ROWS, ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_reply_row(row, result, expected):
    classification = classify(result)
    assert classification.outcome == expected, row
    assert classification.reason and result.stage in classification.reason


def test_http_auth_failures_raise_an_alert_and_others_do_not():
    assert classify(http(REPLY_READ, 401)).alert
    assert classify(http(REPLY_READ, 403)).alert
    assert not classify(http(REPLY_READ, 404)).alert
    assert not classify(smtp(DATA_SENT, 550)).alert


def test_retry_after_is_passed_on():
    assert classify(http(REPLY_READ, 429, retry_after=120)).retry_after_seconds == 120


# What aiosmtplib raises for each server behaviour, at the stage it happens.
RCPT_550 = aiosmtplib.SMTPRecipientRefused(550, "5.1.1 user unknown", "bob@example.com")
AIOSMTPLIB_ERRORS = [
    ("4yz after the body", aiosmtplib.SMTPDataError(451, "4.3.0 later"), DATA_SENT, TRANSIENT),
    ("5yz after the body", aiosmtplib.SMTPDataError(554, "5.7.1 no"), DATA_SENT, PERMANENT),
    ("421 after the body", aiosmtplib.SMTPDataError(421, "4.7.0 bye"), DATA_SENT, TRANSIENT),
    (
        "4yz at RCPT for every recipient",
        aiosmtplib.SMTPRecipientsRefused(
            [aiosmtplib.SMTPRecipientRefused(450, "4.2.0 busy", "bob@example.com")]
        ),
        ENVELOPE,
        TRANSIENT,
    ),
    (
        "5yz at RCPT for every recipient",
        aiosmtplib.SMTPRecipientsRefused([RCPT_550]),
        ENVELOPE,
        PERMANENT,
    ),
    # One RCPT per intent: a partly refused envelope surfaces as the refused
    # recipient's own SMTPRecipientRefused from the low-level rcpt() call.
    ("5yz at RCPT for some recipients", RCPT_550, ENVELOPE, PERMANENT),
    ("4yz at MAIL", aiosmtplib.SMTPSenderRefused(451, "4.3.0", "a@b.c"), ENVELOPE, TRANSIENT),
    # 5yz at MAIL refuses our sender, not the recipient: pause, never fail (issue 14)
    ("5yz at MAIL", aiosmtplib.SMTPSenderRefused(553, "5.1.8", "a@b.c"), ENVELOPE, TRANSIENT),
    (
        "hangs up after the body",
        aiosmtplib.SMTPServerDisconnected("Unexpected EOF received"),
        DATA_SENT,
        AMBIGUOUS,
    ),
    (
        "no reply to the body within the timeout",
        aiosmtplib.SMTPReadTimeoutError("Timed out waiting for server response"),
        DATA_SENT,
        AMBIGUOUS,
    ),
    (
        "421 greeting",
        aiosmtplib.SMTPConnectResponseError(421, "4.3.2 not now"),
        CONNECTING,
        TRANSIENT,
    ),
    ("nothing listening", aiosmtplib.SMTPConnectError("refused"), CONNECTING, TRANSIENT),
    (
        "greeting never comes",
        aiosmtplib.SMTPConnectTimeoutError("timed out"),
        CONNECTING,
        TRANSIENT,
    ),
    ("AUTH refused", aiosmtplib.SMTPAuthenticationError(535, "5.7.8 bad"), CONNECTING, TRANSIENT),
    ("EHLO refused", aiosmtplib.SMTPHeloError(501, "5.5.4 no"), CONNECTING, TRANSIENT),
    ("socket reset before DATA", ConnectionResetError(104, "reset"), ENVELOPE, TRANSIENT),
    ("timeout after the body", TimeoutError(), DATA_SENT, AMBIGUOUS),
]


@pytest.mark.parametrize(
    "behaviour,error,stage,expected", AIOSMTPLIB_ERRORS, ids=[row[0] for row in AIOSMTPLIB_ERRORS]
)
def test_every_aiosmtplib_error(behaviour, error, stage, expected):
    result = describe_failure(error, stage)
    assert result.error_type == type(error).__name__
    assert classify(result).outcome == expected, behaviour
    if isinstance(error, aiosmtplib.SMTPResponseException):
        assert result.code == error.code
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        assert result.code == error.recipients[0].code


def test_overrides_move_codes_and_enhanced_statuses():
    overrides = parse_overrides("552=transient, 4.7.1=permanent")
    assert classify(smtp(DATA_SENT, 552, "5.2.2 mailbox full"), overrides).outcome == TRANSIENT
    assert classify(smtp(ENVELOPE, 450, "4.7.1 policy"), overrides).outcome == PERMANENT
    assert classify(smtp(ENVELOPE, 450, "4.2.0 busy"), overrides).outcome == TRANSIENT
    assert classify(smtp(DATA_SENT, 552, "5.2.2 full")).outcome == PERMANENT


def test_an_enhanced_status_override_wins_over_a_code_override():
    overrides = parse_overrides("451=permanent,4.4.1=transient")
    assert classify(smtp(DATA_SENT, 451, "4.4.1 no answer"), overrides).outcome == TRANSIENT
    assert classify(smtp(DATA_SENT, 451, "4.3.0 other"), overrides).outcome == PERMANENT


@pytest.mark.parametrize(
    "text", ["552=accepted", "552", "abc=transient", "252=transient", "2.0.0=permanent", "9.9=x"]
)
def test_bad_overrides_are_refused_with_the_entry_named(text):
    with pytest.raises(ValueError) as raised:
        parse_overrides(text)
    assert text.split(",")[0] in str(raised.value)


def test_overrides_come_from_the_environment(tmp_path):
    environ = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 32}
    good = load_settings(
        {**environ, "CONSOLE_CLASSIFY_OVERRIDES": "552=transient"}, instance_path=tmp_path
    )
    assert parse_overrides(good.classify_overrides).by_code == {552: TRANSIENT}
    with pytest.raises(ConfigError, match="CONSOLE_CLASSIFY_OVERRIDES"):
        load_settings(
            {**environ, "CONSOLE_CLASSIFY_OVERRIDES": "552=maybe"}, instance_path=tmp_path
        )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("5.1.1 user unknown", "5.1.1"),
        ("4.7.1 Greylisted", "4.7.1"),
        ("2.0.0 Ok", "2.0.0"),
        ("5.1.10", "5.1.10"),
        ("user unknown", None),
        ("5.1 nope", None),
        (None, None),
    ],
)
def test_enhanced_status_is_read_from_the_reply(text, expected):
    assert enhanced_status_of(text) == expected


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("2.0.0 Ok: queued as 4Jx1Qz3Wn7z1", "4Jx1Qz3Wn7z1"),
        ("OK id=1rQ8xy-0004Ab-2F", "1rQ8xy-0004Ab-2F"),
        ("Ok 0100018c2f1e5d6a-5b3e-4a1c-9d2e-000000", "0100018c2f1e5d6a-5b3e-4a1c-9d2e-000000"),
        ("2.0.0 Message accepted", None),
    ],
)
def test_the_relay_queue_id_is_read_from_the_250_reply(reply, expected):
    assert provider_id_from_reply(reply) == expected
