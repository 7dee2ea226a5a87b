"""The fast serializer writes what build_message() means, for every shipped template."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import re
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from types import SimpleNamespace

import jinja2.meta
import pytest

from console.mail.catalog import RenderedParts, default_catalog
from console.mail.render import build_message
from console.mail.serialize import MAX_LINE_BYTES, encode_body, serialize_message

DATE = dt.datetime(2026, 11, 29, 12, 30, 5, 123456, tzinfo=dt.UTC)
MAIL_FROM = "Outbox Console <noreply@outbox.example>"
MESSAGE_ID = "<5f1c9e0a3b2d4c8e9f7a6b5c4d3e2f10@outbox.example>"

ASCII_VALUE = "Ada Lovelace"
NON_ASCII_VALUE = "Zoë Ünal – 東京 ☕ €"
# What an application may put in params, beyond plain words.
AWKWARD_VALUES = {
    "long non-ASCII": "Grüße aus Köln, " * 80,
    "mostly CJK": "東京都渋谷区神南一丁目" * 30,
    "line above 998 bytes": "x" * 1500,
    "trailing spaces and tab": "end   \tspace  ",
    "encoded-word lookalike": "=?utf-8?q?not_encoded?=",
}


def params_for(template: str, value: str) -> dict:
    """Values for every variable `template` uses, loops included."""
    if template == "order-confirmation":
        items = [
            {"quantity": 2, "name": value, "price": "€7.80"},
            {"quantity": 1, "name": "Tea", "price": "1"},
        ]
        return {"customer_name": value, "order_number": "A-1", "items": items, "total": "€9.80"}
    if template == "ops-alert":
        return {
            "condition": "dead_letter",
            "fired_at": "2026-11-29T12:00:00Z",
            "summary": value,
            "details": {"count": 3, "note": value},
        }
    catalog = default_catalog()
    environment = catalog._text_env
    names: set[str] = set()
    for file in ("subject.txt", "body.txt", "body.html"):
        path = catalog.root / template / "v1" / file
        if path.is_file():
            names |= jinja2.meta.find_undeclared_variables(environment.parse(path.read_text()))
    return {name: value for name in names}


def parsed(data: bytes) -> EmailMessage:
    return email.message_from_bytes(data, policy=email.policy.default)


def lines_of(text: str) -> list[str]:
    """Text as a reader sees it: line breaks are breaks, CRLF (canonical) or LF alike."""
    return text.replace("\r\n", "\n").split("\n")


def meaning(message: EmailMessage) -> dict:
    """Headers and decoded bodies: what a mail client shows."""
    parts = list(message.iter_parts()) if message.is_multipart() else [message]
    return {
        "from": str(message["From"]),
        "to": str(message["To"]),
        "subject": str(message["Subject"]),
        "message-id": str(message["Message-ID"]),
        "mime-version": str(message["MIME-Version"]),
        "content-type": message.get_content_type(),
        "parts": [(part.get_content_type(), lines_of(part.get_content())) for part in parts],
    }


def both(template: str, value: str) -> tuple[bytes, EmailMessage, RenderedParts]:
    parts = default_catalog().render(template, 1, params_for(template, value))
    fast = serialize_message(
        mail_from=MAIL_FROM,
        recipient="ada@example.com",
        message_id=MESSAGE_ID,
        parts=parts,
        date=DATE,
    )
    intent = SimpleNamespace(recipient="ada@example.com", message_id=MESSAGE_ID)
    reference = build_message(intent, mail_from=MAIL_FROM, parts=parts)
    return fast, parsed(reference.as_bytes(policy=email.policy.SMTP)), parts


def assert_wire_format(data: bytes) -> None:
    assert data.isascii(), "7-bit clean: every non-ASCII byte is encoded"
    assert data.endswith(b"\r\n")
    assert b"\n" not in data.replace(b"\r\n", b""), "no bare LF"
    assert b"\r" not in data.replace(b"\r\n", b""), "no bare CR"
    assert max(len(line) for line in data.split(b"\r\n")) <= MAX_LINE_BYTES


TEMPLATES = default_catalog().names()
VALUES = {"ASCII": ASCII_VALUE, "non-ASCII": NON_ASCII_VALUE, **AWKWARD_VALUES}


@pytest.mark.parametrize("label", list(VALUES))
@pytest.mark.parametrize("template", TEMPLATES)
def test_same_headers_and_decoded_bodies_as_build_message(template, label):
    fast, reference, parts = both(template, VALUES[label])
    message = parsed(fast)

    assert_wire_format(fast)
    assert not message.defects and all(not p.defects for p in message.walk())
    mine, theirs = meaning(message), meaning(reference)
    # The subject is compared with the rendered text itself: the email package's own
    # output decodes encoded-word lookalikes and, folding a long non-ASCII subject,
    # drops the space at an encoded-word boundary.
    assert mine.pop("subject") == parts.subject
    theirs.pop("subject")
    assert mine == theirs
    assert parsedate_to_datetime(message["Date"]) == DATE.replace(microsecond=0)


def test_the_date_header_is_rfc5322():
    fast, _, _ = both("login-code", ASCII_VALUE)
    assert re.search(rb"^Date: Sun, 29 Nov 2026 12:30:05 \+0000\r$", fast, re.MULTILINE)


def test_a_non_ascii_display_name_in_from_is_encoded():
    parts = RenderedParts(subject="Hi", text="Hello\n", html=None)
    fast = serialize_message(
        mail_from="Café Olé <shop@example.com>",
        recipient="a@example.com",
        message_id=MESSAGE_ID,
        parts=parts,
        date=DATE,
    )
    assert_wire_format(fast)
    assert str(parsed(fast)["From"]) == "Café Olé <shop@example.com>"


def test_an_internationalized_recipient_takes_the_smtputf8_path():
    parts = RenderedParts(subject="Hi", text="Hello\n", html=None)
    fast = serialize_message(
        mail_from=MAIL_FROM,
        recipient="zoë@example.com",
        message_id=MESSAGE_ID,
        parts=parts,
        date=DATE,
    )
    message = parsed(fast)
    assert str(message["To"]) == "zoë@example.com" and lines_of(message.get_content()) == [
        "Hello",
        "",
    ]


def test_line_breaks_of_any_kind_become_crlf_in_the_body():
    text = "one\r\ntwo\rthree\nfour\n.hidden\nFrom here on\n..\n."
    parts = RenderedParts(subject="Hi", text=text, html="<p>a\rb</p>")
    fast = serialize_message(
        mail_from=MAIL_FROM,
        recipient="a@example.com",
        message_id=MESSAGE_ID,
        parts=parts,
        date=DATE,
    )
    assert_wire_format(fast)
    text, html = parsed(fast).iter_parts()
    expected = ["one", "two", "three", "four", ".hidden", "From here on", "..", ".", ""]
    assert lines_of(text.get_content()) == expected
    assert lines_of(html.get_content()) == ["<p>a", "b</p>", ""]


@pytest.mark.parametrize(
    "text,encoding",
    [
        ("plain ASCII\n", b"7bit"),
        ("ü" + "a" * 100, b"quoted-printable"),
        ("a" * 1200, b"quoted-printable"),
        ("東京" * 50, b"base64"),
        ("NUL \x00 inside", b"quoted-printable"),
    ],
)
def test_the_transfer_encoding_fits_the_text(text, encoding):
    chosen, body = encode_body(text)
    assert chosen == encoding
    assert max(len(line) for line in body.split(b"\r\n")) <= MAX_LINE_BYTES
