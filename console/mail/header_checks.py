"""Checks on every value that reaches a header or the SMTP envelope; pure, no IO.

A row may have been written by any program (docs/schema.md invites plain SQL), so
the worker checks, at compose time, what ``enqueue()`` checked at the door: the
recipient is one valid address, the Message-ID has the form ``<left@right>``,
and no header value holds a line break, a NUL or another control character
(a TAB is allowed). ``UnsafeHeader`` names the field that failed; its class
name is the ``error_type`` the classifier knows (``classify.UNSAFE_HEADER``).
"""

from __future__ import annotations

import re

RECIPIENT = "recipient"
MESSAGE_ID = "message_id"
SUBJECT = "subject"
IDEMPOTENCY_KEY = "idempotency_key"

# C0 controls but TAB, DEL, and the Unicode line breaks some readers honour.
_UNSAFE_CHARACTER = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
_CHARACTER_NAMES = {"\r": "CR", "\n": "LF", "\x00": "NUL"}
_ID_PART = "[\x21-\x3b\x3d\x3f\x41-\x7e]+"  # printable ASCII but '<', '>' and '@'
_MESSAGE_ID_FORM = re.compile(f"<{_ID_PART}@{_ID_PART}>")
_EXPLANATION_CHARS = 120
# email_validator's SPECIAL_USE_DOMAIN_NAMES (RFC 6761) but "test", which it lets through
# in a test environment; written out so the worker's start does not wait for its import
# (tests/unit/test_header_checks.py holds the two lists equal).
_RESERVED_SUFFIXES = (".arpa", ".invalid", ".local", ".localhost", ".onion")
# The common address, checked without the full validator: a dot-atom of ASCII before the
# @, ASCII host labels after it (no hyphen at either end, no "--" as in Punycode) and an
# alphabetic top-level label. Every address this accepts, the validator accepts too
# (tests/unit/test_header_checks.py shows it on generated ones); anything else goes to it.
_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9]|-(?!-)){0,61}(?<!-)"
_PLAIN_ADDRESS = re.compile(f"{_ATOM}(?:\\.{_ATOM})*@(?:{_LABEL}\\.)+[A-Za-z]{{2,63}}")


class UnsafeHeader(ValueError):
    """A value would break a header or the envelope; the message names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field


def unsafe_character(value: str) -> str | None:
    """Name the first character of `value` that must not be in a header ("CR", "U+000B")."""
    match = _UNSAFE_CHARACTER.search(value)
    if match is None:
        return None
    character = match.group()
    return _CHARACTER_NAMES.get(character, f"U+{ord(character):04X}")


def check_header_value(field: str, value: object) -> None:
    """Raise UnsafeHeader unless `value` is a string that can stand in one header line."""
    if not isinstance(value, str):
        raise UnsafeHeader(field, "is missing")
    character = unsafe_character(value)
    if character is not None:
        raise UnsafeHeader(field, f"contains {character}: a header value holds no line break")


def check_recipient(value: object) -> None:
    """Raise UnsafeHeader unless `value` is exactly one valid address, nothing around it."""
    check_header_value(RECIPIENT, value)
    assert isinstance(value, str)
    if is_plain_address(value):
        return
    from email_validator import EmailNotValidError, validate_email  # the unusual address

    try:
        validate_email(
            value, check_deliverability=False, globally_deliverable=False, test_environment=True
        )
    except EmailNotValidError as error:
        explanation = str(error)[:_EXPLANATION_CHARS]
        raise UnsafeHeader(RECIPIENT, f"is not a single valid address ({explanation})") from None


def is_plain_address(value: str) -> bool:
    """Whether `value` is an everyday ASCII address that needs no closer look."""
    if len(value) > 254 or not _PLAIN_ADDRESS.fullmatch(value):
        return False
    local, domain = value.rsplit("@", 1)
    return len(local) <= 64 and not domain.lower().endswith(_RESERVED_SUFFIXES)


def check_message_id(value: object) -> None:
    """Raise UnsafeHeader unless `value` has the form ``<left@right>`` in printable ASCII."""
    check_header_value(MESSAGE_ID, value)
    assert isinstance(value, str)
    if not _MESSAGE_ID_FORM.fullmatch(value):
        raise UnsafeHeader(MESSAGE_ID, "is not of the form <left@right>")


def check_outgoing(
    *, recipient: object, message_id: object, subject: object, idempotency_key: object
) -> None:
    """Check everything a message puts in a header or the envelope; UnsafeHeader on the first."""
    check_recipient(recipient)
    check_message_id(message_id)
    check_header_value(SUBJECT, subject)
    check_header_value(IDEMPOTENCY_KEY, idempotency_key)  # the HTTP Idempotency-Key header
