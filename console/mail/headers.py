"""Header lines for the fast serializer: encode only what needs it, fold at whitespace.

Plain ASCII words are written as they are; a run of words that cannot stand as plain
text (non-ASCII, a look-alike of an encoded word ``=?``, leading or trailing
whitespace, a word too long for a line) becomes RFC 2047 encoded words, quoted-printable
(``Q``) when mostly ASCII, else base64 (``B``), never splitting a character. Whitespace
between words is kept exactly: a fold is a CRLF inserted before it (RFC 5322 §2.2.3).
Every line is at most 78 characters where a fold point exists, and never above 998.
"""

from __future__ import annotations

import binascii
import json
import re
from email.utils import parseaddr

CRLF = "\r\n"
LINE_CHARS = 78  # RFC 5322 §2.1.1: SHOULD
_ENCODED_WORD_CHARS = 66  # "Subject: " + 66 stays within 78
_PLAIN_WORD_CHARS = 900  # a longer word is encoded so that no line passes 998
_WHITESPACE_RUN_CHARS = 60  # a longer run goes inside encoded words, where it can be split
_Q_LITERAL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!*+-/")
_TOKENS = re.compile(r"([ \t]*)([^ \t]*)")
_PLAIN_PHRASE = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+( [A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")


def fold(name: str, pieces: list[tuple[str, str]]) -> bytes:
    """Write ``name: `` and the (whitespace, token) pieces, folding before whitespace."""
    lines: list[str] = []
    line = f"{name}:"
    for index, (space, token) in enumerate(pieces):
        if index == 0:
            line += " " + token
        elif space and len(line) + len(space) + len(token) > LINE_CHARS:
            lines.append(line)
            line = space + token
        else:
            line += space + token
    lines.append(line)
    return (CRLF.join(lines) + CRLF).encode("utf-8")


def _words(text: str) -> list[tuple[str, str]]:
    """Split `text` into (whitespace before, word) pairs; trailing whitespace ends in (ws, "")."""
    return [(m.group(1), m.group(2)) for m in _TOKENS.finditer(text) if m.group(0)]


def _plain(word: str) -> bool:
    return word.isascii() and "=?" not in word and len(word) <= _PLAIN_WORD_CHARS


def text_pieces(text: str) -> list[tuple[str, str]]:
    """The pieces of an unstructured value (Subject): plain words and encoded-word runs."""
    words = _words(text)
    if not words:
        return [("", "")]
    encode = [not _plain(word) for _, word in words]
    encode[0] = encode[0] or bool(words[0][0])  # leading whitespace would be lost
    if not words[-1][1]:  # trailing whitespace would be lost: it joins the last word's run
        encode[-1] = True
        if len(words) > 1:
            encode[-2] = True
    for index, (space, _) in enumerate(words):
        if index and len(space) > _WHITESPACE_RUN_CHARS:
            encode[index - 1] = encode[index] = True
    pieces: list[tuple[str, str]] = []
    index = 0
    while index < len(words):
        space, word = words[index]
        if not encode[index]:
            pieces.append((space, word))
            index += 1
            continue
        run = word if index else space + word  # inner whitespace goes inside the run
        end = index + 1
        while end < len(words) and encode[end]:
            run += words[end][0] + words[end][1]
            end += 1
        encoded = encoded_words(run)
        pieces.append((space if index else "", encoded[0]))
        pieces += [(" ", word) for word in encoded[1:]]
        index = end
    return pieces


def encoded_words(text: str, limit: int = _ENCODED_WORD_CHARS) -> list[str]:
    """RFC 2047 encoded words for `text`, each at most `limit` characters, whole characters."""
    if len(_q_encode(text)) <= 1.5 * len(_b_encode(text)):  # readable unless much longer
        return _chunks(text, "q", limit - 12, _q_encode)
    return _chunks(text, "b", limit - 12, _b_encode)


def _q_encode(text: str) -> str:
    out = []
    for byte in text.encode("utf-8"):
        if byte in _Q_LITERAL:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("_")
        else:
            out.append(f"={byte:02X}")
    return "".join(out)


def _b_encode(text: str) -> str:
    return binascii.b2a_base64(text.encode("utf-8"), newline=False).decode("ascii")


def _encoded_word(text: str) -> str:
    if len(_q_encode(text)) <= 1.5 * len(_b_encode(text)):
        return f"=?utf-8?q?{_q_encode(text)}?="
    return f"=?utf-8?b?{_b_encode(text)}?="


def phrase_pieces(name: str) -> list[tuple[str, str]]:
    """A display name: as it is, quoted, or encoded words split at its own spaces.

    Whitespace between encoded words in a phrase is kept by readers, so each split
    uses one of the name's spaces as the separator; a word too long for one encoded
    word stays whole rather than be split without a space.
    """
    if _PLAIN_PHRASE.fullmatch(name):
        return [("", word) if i == 0 else (" ", word) for i, word in enumerate(name.split(" "))]
    if name.isascii() and "=?" not in name:
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return [("", f'"{escaped}"')]
    chunks: list[str] = []
    current: str | None = None
    for part in name.split(" "):
        candidate = part if current is None else f"{current} {part}"
        if current is not None and len(_encoded_word(candidate)) > _ENCODED_WORD_CHARS:
            chunks.append(current)
            candidate = part
        current = candidate
    chunks.append(current or "")
    return [("" if i == 0 else " ", _encoded_word(chunk)) for i, chunk in enumerate(chunks)]


def mailbox_header(field: str, mailbox: str) -> bytes:
    """``From:`` (or another mailbox field) for ``Name <addr>`` as configured."""
    name, address = parseaddr(mailbox)
    address = address or mailbox
    if not name:
        return fold(field, [("", address)])
    return fold(field, [*phrase_pieces(name), (" ", f"<{address}>")])


def _chunks(text: str, kind: str, payload_chars: int, encode) -> list[str]:
    words: list[str] = []
    current = ""
    for character in text:
        if current and len(encode(current + character)) > payload_chars:
            words.append(current)
            current = ""
        current += character
    words.append(current)
    return [f"=?utf-8?{kind}?{encode(chunk)}?=" for chunk in words]


def subject_header(subject: str) -> bytes:
    """``Subject:`` with only what needs it encoded, folded at whitespace."""
    return fold("Subject", text_pieces(subject))


def metadata_header(provider: str | None, reference: str) -> tuple[str, str] | None:
    """The header that carries `reference` in `provider`'s metadata channel over SMTP, as
    (name, value); None without a provider, and for Resend (its HTTP API takes ``tags``)."""
    from console.events import metadata

    key = metadata.REFERENCE_KEY
    if provider == metadata.POSTMARK:
        return f"X-PM-Metadata-{key}", reference
    if provider == metadata.MAILGUN:
        return "X-Mailgun-Variables", json.dumps({key: reference})
    if provider == metadata.SENDGRID:
        return "X-SMTPAPI", json.dumps({"unique_args": {key: reference}})
    if provider == metadata.SES:
        return "X-SES-MESSAGE-TAGS", f"{key}={reference}"
    return None
