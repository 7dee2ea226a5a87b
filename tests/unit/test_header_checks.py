"""Header and envelope checks: the table of values that may and may not reach the wire."""

from __future__ import annotations

import datetime as dt
import email
import email.policy

import email_validator
import pytest
from email_validator import validate_email
from hypothesis import given, settings
from hypothesis import strategies as st

from console.core.classify import UNSAFE_HEADER, classify
from console.core.send_result import SendResult
from console.mail import header_checks
from console.mail.catalog import RenderedParts
from console.mail.header_checks import (
    UnsafeHeader,
    check_message_id,
    check_outgoing,
    check_recipient,
    unsafe_character,
)
from console.mail.serialize import serialize_message
from console.vocabulary import CLAIMED, PERMANENT

SAFE = dict(
    recipient="ada@example.com",
    message_id="<5f1c9e0a3b2d@outbox.example>",
    subject="Welcome, Bob",
    idempotency_key="user:7:welcome",
)
INJECTED = "\r\nBcc: attacker@evil.example"

# (case, field changed, value, field named by the error)
UNSAFE = [
    ("CR/LF in a rendered subject", "subject", "Welcome, Bob" + INJECTED, "subject"),
    ("LF alone in a subject", "subject", "Welcome\nBcc: x@evil.example", "subject"),
    ("CR alone in a subject", "subject", "Welcome\rBob", "subject"),
    ("NUL in a subject", "subject", "Welcome\x00Bob", "subject"),
    ("vertical tab in a subject", "subject", "Welcome\x0bBob", "subject"),
    ("Unicode line separator in a subject", "subject", "Welcome\u2028Bob", "subject"),
    ("CR/LF in the recipient", "recipient", "v@example.com" + INJECTED, "recipient"),
    ("NUL in the recipient", "recipient", "v@example.com\x00", "recipient"),
    (
        "display name and a second address",
        "recipient",
        "Victim <v@example.com>, attacker@evil.example",
        "recipient",
    ),
    ("display name alone", "recipient", "Victim <v@example.com>", "recipient"),
    ("two bare addresses", "recipient", "v@example.com, attacker@evil.example", "recipient"),
    ("space around the recipient", "recipient", " v@example.com", "recipient"),
    ("no address at all", "recipient", "", "recipient"),
    ("recipient missing", "recipient", None, "recipient"),
    ("CR/LF in the Message-ID", "message_id", "<m@outbox.example>" + INJECTED, "message_id"),
    ("Message-ID without brackets", "message_id", "m@outbox.example", "message_id"),
    ("Message-ID without a domain", "message_id", "<m>", "message_id"),
    ("Message-ID with a space", "message_id", "<m 1@outbox.example>", "message_id"),
    ("Message-ID with two @", "message_id", "<a@b@outbox.example>", "message_id"),
    ("Message-ID with text after it", "message_id", "<m@outbox.example> x", "message_id"),
    ("LF in the idempotency key", "idempotency_key", "k\nX-Evil: 1", "idempotency_key"),
]

SAFE_VARIANTS = [
    ("subject with a tab", "subject", "end   \tspace"),
    ("non-ASCII subject", "subject", "Zoë Ünal – 東京 ☕ €"),
    ("encoded-word lookalike subject", "subject", "=?utf-8?q?not_encoded?="),
    ("upper-case recipient", "recipient", "Ada@Example.COM"),
    ("internationalized recipient", "recipient", "zoë@exämple.com"),
    ("test domain recipient", "recipient", "ada@outbox.test"),
    ("dotted Message-ID", "message_id", "<a.b-c_d+e@mail.shop.example>"),
]


@pytest.mark.parametrize(("case", "field", "value", "named"), UNSAFE, ids=[u[0] for u in UNSAFE])
def test_unsafe_values_are_refused_naming_the_field(case, field, value, named):
    with pytest.raises(UnsafeHeader) as refused:
        check_outgoing(**{**SAFE, field: value})
    assert refused.value.field == named
    assert str(refused.value).startswith(named)
    assert unsafe_character(str(refused.value)) is None, "the reason itself is one line"


@pytest.mark.parametrize(
    ("case", "field", "value"), SAFE_VARIANTS, ids=[s[0] for s in SAFE_VARIANTS]
)
def test_safe_values_pass(case, field, value):
    check_outgoing(**{**SAFE, field: value})


def test_the_refused_character_is_named():
    assert unsafe_character("a\r\nb") == "CR"
    assert unsafe_character("a\nb") == "LF"
    assert unsafe_character("a\x00b") == "NUL"
    assert unsafe_character("a\x1bb") == "U+001B"
    assert unsafe_character("a\tb é") is None


def test_recipient_and_message_id_checks_alone():
    check_recipient("ada@example.com")
    check_message_id("<x@y>")
    with pytest.raises(UnsafeHeader, match="single valid address"):
        check_recipient("Victim <v@example.com>, attacker@evil.example")
    with pytest.raises(UnsafeHeader, match="<left@right>"):
        check_message_id("x@y")


def test_an_unsafe_header_is_a_permanent_failure_and_the_error_type_is_the_class_name():
    assert UnsafeHeader.__name__ == UNSAFE_HEADER  # also when a transport reports it
    result = SendResult(stage=CLAIMED, error="subject contains CR", error_type=UNSAFE_HEADER)
    classification = classify(result)
    assert classification.outcome == PERMANENT
    assert "subject contains CR" in classification.reason


SERIALIZE = dict(
    mail_from="Shop <shop@example.com>",
    recipient="ada@example.com",
    message_id="<m@outbox.example>",
    date=dt.datetime(2026, 11, 29, 12, 30, tzinfo=dt.UTC),
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("subject", "Welcome, Bob" + INJECTED),
        ("subject", "Welcome, Bob\nBcc: attacker@evil.example"),
        ("recipient", "v@example.com" + INJECTED),
        ("recipient", "vö@example.com" + INJECTED),  # the internationalized path too
        ("message_id", "<m@outbox.example>" + INJECTED),
    ],
)
def test_the_serializer_refuses_a_header_with_a_line_break(field, value):
    subject = value if field == "subject" else "Welcome"
    arguments = {**SERIALIZE, **({} if field == "subject" else {field: value})}
    parts = RenderedParts(subject=subject, text="Hello\n", html=None)
    with pytest.raises(UnsafeHeader) as refused:
        serialize_message(parts=parts, **arguments)
    assert refused.value.field == field


def test_the_serializer_still_writes_safe_headers():
    parts = RenderedParts(subject="Welcome,\tBob", text="Hello\n", html=None)
    message = email.message_from_bytes(
        serialize_message(parts=parts, **SERIALIZE), policy=email.policy.default
    )
    assert message["Subject"] == "Welcome,\tBob"
    assert message["To"] == "ada@example.com" and "Bcc" not in message


@settings(max_examples=30, deadline=None, derandomize=True)  # a validation an example;
# the same examples each run: the strategy filters what its regex cannot fullmatch, and a
# random draw may filter enough to fail the health check
@given(st.from_regex(header_checks._PLAIN_ADDRESS, fullmatch=True))
def test_every_address_the_quick_path_takes_the_full_validator_takes_too(address):
    if header_checks.is_plain_address(address):
        validate_email(
            address, check_deliverability=False, globally_deliverable=False, test_environment=True
        )


@pytest.mark.parametrize(
    "address",
    [
        "ada@example.com",
        "a.b+tag@mail.example.co.uk",
        "x@my-host.test",
        "o'neil@example.org",
    ],
)
def test_everyday_addresses_take_the_quick_path(address):
    assert header_checks.is_plain_address(address)
    header_checks.check_recipient(address)


@pytest.mark.parametrize(
    "address",
    [
        "ada@printer.local",
        "ada@host.LOCALHOST",
        "ada@xn--zz.com",
        "ada@-host.com",
        "ada@host-.com",
        "a..b@example.com",
        ".ada@example.com",
        "ada@example.c0m",
        "ada@[127.0.0.1]",
        "ädä@example.com",
        "ada@exämple.com",
        "x" * 65 + "@example.com",
        "ada@" + "a" * 250 + ".com",
        '"quoted"@example.com',
    ],
)
def test_anything_unusual_goes_to_the_full_validator(address):
    assert not header_checks.is_plain_address(address)


def test_the_reserved_suffixes_are_the_validators_special_use_names_but_test():
    names = [name for name in email_validator.SPECIAL_USE_DOMAIN_NAMES if name != "test"]
    assert header_checks._RESERVED_SUFFIXES == tuple(f".{name}" for name in names)
