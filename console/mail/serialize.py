"""A fast RFC 5322 / MIME serializer for rendered emails.

Building an ``email.message.EmailMessage`` costs about a millisecond per
message; this writes the same message directly as bytes: headers From, To,
Subject (RFC 2047 when needed), Date, Message-ID, MIME-Version; a text/plain
body or a multipart/alternative of text and HTML; 7bit when the text allows it,
else quoted-printable or base64; CRLF line ends and no line above 998 bytes.
Tests parse the output with the ``email`` package and compare it with
``render.build_message``. Addresses that need SMTPUTF8 take the slow path.
A header value holding a line break (or another control character) is refused
with ``header_checks.UnsafeHeader``, never written.
"""

from __future__ import annotations

import binascii
import datetime as dt
import email.policy
import functools
import secrets
from email.message import EmailMessage
from email.utils import format_datetime
from types import SimpleNamespace

from console.mail.catalog import RenderedParts
from console.mail.header_checks import (
    MESSAGE_ID,
    RECIPIENT,
    SUBJECT,
    check_header_value,
)
from console.mail.render import build_message

CRLF = b"\r\n"
MAX_LINE_BYTES = 998
_PLAIN_SUBJECT_CHARS = 68  # "Subject: " + 68 stays within the recommended 78
_ENCODED_WORD_BYTES = 42  # 56 base64 characters, a 68-character encoded word
_BASE64_CHUNK_BYTES = 57  # 76 base64 characters a line
_SEVEN_BIT_SAFE = bytes([9, 10, 13, *range(32, 127)])  # may travel as 7bit unencoded
_NON_ASCII = bytes(range(128, 256))


def serialize_message(
    *,
    mail_from: str,
    recipient: str,
    message_id: str,
    parts: RenderedParts,
    date: dt.datetime,
) -> bytes:
    """Return the complete message as bytes, ready for SMTP DATA; UnsafeHeader on a line break."""
    check_header_value(RECIPIENT, recipient)
    check_header_value(MESSAGE_ID, message_id)
    check_header_value(SUBJECT, parts.subject)
    check_header_value("mail_from", mail_from)
    if not recipient.isascii():
        return _slow_path(mail_from, recipient, message_id, parts)
    head = b"".join(
        (
            _from_header(mail_from),
            b"To: ",
            recipient.encode("ascii"),
            CRLF,
            _subject_header(parts.subject),
            b"Date: ",
            _date_text(date.replace(microsecond=0)),
            CRLF,
            b"Message-ID: ",
            message_id.encode("ascii"),
            CRLF,
            b"MIME-Version: 1.0\r\n",
        )
    )
    if parts.html is None:
        return head + _text_part(parts.text, "plain")
    boundary = _boundary(parts)
    return b"".join(
        (
            head,
            b'Content-Type: multipart/alternative; boundary="',
            boundary,
            b'"\r\n\r\n--',
            boundary,
            CRLF,
            _text_part(parts.text, "plain"),
            b"\r\n--",
            boundary,
            CRLF,
            _text_part(parts.html, "html"),
            b"\r\n--",
            boundary,
            b"--\r\n",
        )
    )


def _text_part(text: str, subtype: str) -> bytes:
    """Content-Type and Content-Transfer-Encoding headers, a blank line and the body."""
    encoding, body = encode_body(text)
    return b"".join(
        (
            b"Content-Type: text/",
            subtype.encode("ascii"),
            b'; charset="utf-8"\r\nContent-Transfer-Encoding: ',
            encoding,
            b"\r\n\r\n",
            body,
        )
    )


def encode_body(text: str) -> tuple[bytes, bytes]:
    """Return (transfer encoding, body with CRLF line ends and a final CRLF)."""
    lines = text.encode("utf-8").splitlines()
    joined = CRLF.join(lines) + CRLF
    longest = max(map(len, lines), default=0)
    if longest <= MAX_LINE_BYTES and not joined.translate(None, _SEVEN_BIT_SAFE):
        return b"7bit", joined
    non_ascii_bytes = len(joined) - len(joined.translate(None, _NON_ASCII))
    if non_ascii_bytes * 3 > len(joined):
        return b"base64", _base64_lines(joined)
    return b"quoted-printable", binascii.b2a_qp(joined, istext=True)


def _base64_lines(data: bytes) -> bytes:
    step = _BASE64_CHUNK_BYTES
    chunks = (data[i : i + step] for i in range(0, len(data), step))
    return b"".join(binascii.b2a_base64(chunk, newline=False) + CRLF for chunk in chunks)


def _subject_header(subject: str) -> bytes:
    if subject.isascii() and len(subject) <= _PLAIN_SUBJECT_CHARS and "=?" not in subject:
        return b"Subject: " + subject.encode("ascii") + CRLF
    words = (
        b"=?utf-8?b?" + binascii.b2a_base64(chunk, newline=False) + b"?="
        for chunk in _utf8_chunks(subject, _ENCODED_WORD_BYTES)
    )
    return b"Subject: " + b"\r\n ".join(words) + CRLF


def _utf8_chunks(text: str, limit: int) -> list[bytes]:
    """Split `text` into UTF-8 chunks of at most `limit` bytes, never inside a character."""
    chunks: list[bytes] = []
    current = bytearray()
    for character in text:
        encoded = character.encode("utf-8")
        if len(current) + len(encoded) > limit:
            chunks.append(bytes(current))
            current.clear()
        current += encoded
    if current or not chunks:
        chunks.append(bytes(current))
    return chunks


@functools.lru_cache(maxsize=8)
def _from_header(mail_from: str) -> bytes:
    """The From header line, encoded and folded once by the email package."""
    message = EmailMessage(policy=email.policy.SMTP)
    message["From"] = mail_from
    return message.as_bytes().removesuffix(CRLF)


@functools.lru_cache(maxsize=4)
def _date_text(date: dt.datetime) -> bytes:
    return format_datetime(date.astimezone(dt.UTC)).encode("ascii")


def _boundary(parts: RenderedParts) -> bytes:
    while True:
        boundary = "=_" + secrets.token_hex(16)
        if boundary not in parts.text and boundary not in parts.html:
            return boundary.encode("ascii")


def _slow_path(mail_from: str, recipient: str, message_id: str, parts: RenderedParts) -> bytes:
    """Internationalized addresses: let the email package write an SMTPUTF8 message."""
    intent = SimpleNamespace(recipient=recipient, message_id=message_id)
    message = build_message(intent, mail_from=mail_from, parts=parts)
    return message.as_bytes(policy=email.policy.SMTPUTF8)
