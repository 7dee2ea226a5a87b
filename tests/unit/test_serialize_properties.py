"""The fast serializer under random input (Hypothesis): whatever the subject, the sender's
name and the bodies, the output parses under ``email.policy.strict`` with no defect and
gives back exactly the text it was given; header lines fold within 78 characters where
they can and never pass 998; only what needs it is encoded."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from console.mail.catalog import RenderedParts
from console.mail.header_checks import unsafe_character
from console.mail.serialize import MAX_LINE_BYTES, serialize_message

DATE = dt.datetime(2026, 11, 29, 12, 30, 5, tzinfo=dt.UTC)
MESSAGE_ID = "<5f1c9e0a3b2d4c8e@outbox.example>"
LINE_CHARS = 78
ASCII_WORD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789.,:;!?'-()"

# What may stand in a header value (header_checks refuses the rest before serializing).
header_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).filter(
    lambda value: unsafe_character(value) is None
)
# A display name, as CONSOLE_MAIL_FROM would quote it.
name_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60).map(
    str.strip
)
body_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=400)


def serialize(subject: str, text: str, html: str | None, name: str = "", to="ada@example.com"):
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    mail_from = f'"{quoted}" <shop@example.com>' if name else "shop@example.com"
    parts = RenderedParts(subject=subject, text=text, html=html)
    return serialize_message(
        mail_from=mail_from, recipient=to, message_id=MESSAGE_ID, parts=parts, date=DATE
    )


def as_read(text: str) -> str:
    """The body a reader gets: CRLF, CR and LF alike are line breaks, the last one ends it."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def strict_parse(data: bytes) -> email.message.EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.strict)
    for part in message.walk():
        assert part.defects == [], part.defects
        for name, value in part.items():
            assert getattr(value, "defects", ()) == (), (name, value.defects)
    return message


def header_lines(data: bytes) -> list[bytes]:
    return data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(subject=header_text, name=name_text, text=body_text, html=st.none() | body_text)
@example(
    subject="Your order A-1 has shipped and will arrive tomorrow before noon, we hope",
    name="Shop",
    text="Hello\n",
    html="<p>Hi</p>",
)
@example(subject="  =?utf-8?q?not_encoded?=  ", name="Zoë Ünal – 東京", text="", html=None)
@example(subject="x" * 1200, name="", text="x" * 1500, html=None)
@example(subject="a\tb" + " " * 90 + "c", name="O'Brien, Ann", text="\r.\r\n", html=None)
def test_any_message_parses_strictly_and_round_trips(subject, name, text, html):
    data = serialize(subject, text, html, name)
    assert data.isascii() and data.endswith(b"\r\n")
    assert max(len(line) for line in data.split(b"\r\n")) <= MAX_LINE_BYTES
    message = strict_parse(data)
    assert message["Subject"] == subject
    # RFC 5322 §3.2.2: in a structured field a run of spaces between words means one space
    assert message["From"].addresses[0].display_name in (name, re.sub(" +", " ", name))
    assert message["From"].addresses[0].addr_spec == "shop@example.com"
    parts = list(message.iter_parts()) if html is not None else [message]
    contents = [part.get_content().replace("\r\n", "\n") for part in parts]
    assert contents == [as_read(text)] + ([as_read(html)] if html is not None else [])
    assert message.get_all("MIME-Version") == ["1.0"]
    for part in parts if html is not None else []:
        assert "MIME-Version" not in part


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.text(ASCII_WORD_CHARS, min_size=1, max_size=40), min_size=1, max_size=30))
def test_plain_ascii_subjects_are_never_encoded_and_fold_within_78(words):
    subject = " ".join(words)
    data = serialize(subject, "hi\n", "<p>hi</p>")
    assert b"=?" not in data.split(b"\r\n\r\n")[0], "a plain ASCII subject stays readable"
    assert all(len(line) <= LINE_CHARS for line in header_lines(data))
    assert strict_parse(data)["Subject"] == subject


def test_only_the_non_ascii_run_is_encoded():
    data = serialize("Your order from Café Olé has shipped today", "hi\n", None)
    subject = [line for line in header_lines(data) if line.startswith(b"Subject:")][0]
    assert subject.startswith(b"Subject: Your order from =?utf-8?q?")
    assert subject.endswith(b"?= has shipped today")


def test_the_multipart_content_type_folds_within_78():
    data = serialize("Hi", "hi\n", "<p>hi</p>")
    assert all(len(line) <= LINE_CHARS for line in header_lines(data))
    assert any(line.lstrip().startswith(b'boundary="') for line in header_lines(data))


def test_an_internationalized_recipient_is_the_only_8bit_text_and_no_stray_headers():
    data = serialize("Grüße", "Grüße aus Köln\n", "<p>Grüße</p>", to="zoë@example.com")
    eight_bit = [line for line in data.split(b"\r\n") if not line.isascii()]
    assert eight_bit == ["To: zoë@example.com".encode()]
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert message["To"] == "zoë@example.com" and message["Subject"] == "Grüße"
    for part in message.iter_parts():
        assert "MIME-Version" not in part
        assert part["Content-Transfer-Encoding"] in ("7bit", "quoted-printable", "base64")
