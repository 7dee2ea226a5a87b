"""A fast RFC 5322 / MIME serializer for rendered emails.

Building an ``email.message.EmailMessage`` parses every header into objects and
folds them again on output, for every message on the send path; this writes the
same message directly as bytes: headers From, To, Subject (only what needs it
encoded, RFC 2047; see ``headers``), Date, Message-ID, MIME-Version; a
text/plain body or a multipart/alternative of text and HTML; 7bit when the text
allows it, else quoted-printable or base64; CRLF line ends, header lines folded
within 78 characters, no line above 998 bytes.
A non-ASCII recipient (SMTPUTF8, RFC 6531/6532) is the only 8-bit text: it is
written as UTF-8 in ``To:`` and everything else stays 7-bit clean. With a
provider named, one more header carries the intent's reference in that
provider's metadata channel (``headers.metadata_header``): the reference only,
never params or content.
Tests parse the output with the ``email`` package and compare it with
``render.build_message``. A header value holding a line break (or another
control character) is refused with ``header_checks.UnsafeHeader``, never written.
"""

from __future__ import annotations

import binascii
import datetime as dt
import functools
import random
from email.utils import format_datetime

from console.events.metadata import reference_for
from console.mail.catalog import RenderedParts
from console.mail.header_checks import (
    MESSAGE_ID,
    RECIPIENT,
    SUBJECT,
    check_header_value,
)
from console.mail.headers import mailbox_header, metadata_header, subject_header

CRLF = b"\r\n"
MAX_LINE_BYTES = 998
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
    provider: str | None = None,
    intent_id: int | None = None,
) -> bytes:
    """Return the complete message as bytes, ready for SMTP DATA; UnsafeHeader on a line break.

    With `provider` and `intent_id`, the message carries the intent's reference in that
    provider's metadata header.
    """
    check_header_value(RECIPIENT, recipient)
    check_header_value(MESSAGE_ID, message_id)
    check_header_value(SUBJECT, parts.subject)
    check_header_value("mail_from", mail_from)
    metadata = _metadata_line(provider, intent_id, message_id)
    head = b"".join(
        (
            _from_header(mail_from),
            b"To: ",
            recipient.encode("utf-8"),  # UTF-8 only for an SMTPUTF8 address
            CRLF,
            subject_header(parts.subject),
            b"Date: ",
            _date_text(date.replace(microsecond=0)),
            CRLF,
            b"Message-ID: ",
            message_id.encode("ascii"),
            CRLF,
            metadata,
            b"MIME-Version: 1.0\r\n",
        )
    )
    if parts.html is None:
        return head + _text_part(parts.text, "plain")
    boundary = _boundary(parts)
    return b"".join(
        (
            head,
            b'Content-Type: multipart/alternative;\r\n boundary="',
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


def _metadata_line(provider: str | None, intent_id: int | None, message_id: str) -> bytes:
    """The provider's metadata header line naming the intent; b"" when there is none."""
    if provider is None or intent_id is None:
        return b""
    header = metadata_header(provider, reference_for(intent_id, message_id))
    if header is None:
        return b""
    name, value = header
    check_header_value(f"{name} header", value)
    return f"{name}: {value}".encode("ascii") + CRLF


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


@functools.lru_cache(maxsize=8)
def _from_header(mail_from: str) -> bytes:
    """The From header line, written once per configured sender."""
    return mailbox_header("From", mail_from)


@functools.lru_cache(maxsize=4)
def _date_text(date: dt.datetime) -> bytes:
    return format_datetime(date.astimezone(dt.UTC)).encode("ascii")


def _boundary(parts: RenderedParts) -> bytes:
    """A MIME boundary found in neither part (it needs to be unique, not unguessable)."""
    while True:
        boundary = f"=_{random.getrandbits(128):032x}"
        if boundary not in parts.text and boundary not in parts.html:
            return boundary.encode("ascii")
