"""A provider's answer, read as untrusted input: bounded, checked, never raising. Pure.

What comes back from a provider's API decides what happens to a message, so
each value is taken only in the shape the provider documents: an id is a short
printable string, an error code a short token, a message is cut and made one
line. Anything else is as if it were absent.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

MAX_ID_CHARS = 255  # the provider_message_id column
MAX_MESSAGE_CHARS = 400
_ID = re.compile(r"[\x21-\x7e]{1,255}")  # printable ASCII, no space
_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclasses.dataclass(frozen=True)
class Reply:
    """What came back: the status, the headers and at most the first bytes of the body."""

    status: int
    headers: Mapping[str, str]  # looked up case-insensitively (httpx.Headers)
    body: bytes
    complete: bool  # False when the body was longer than the transport reads
    reason_phrase: str = ""


@dataclasses.dataclass(frozen=True)
class ProviderAnswer:
    """What a provider's answer says, in the provider's own terms."""

    provider_message_id: str | None = None
    error_code: str | None = None  # the provider's error code or type, for its table
    message: str | None = None  # the provider's words
    malformed: bool = False  # a success status whose body is not the documented one


def json_object(reply: Reply) -> dict[str, Any] | None:
    """The body as a JSON object, or None (not JSON, cut short, not an object)."""
    if not reply.complete:
        return None
    try:
        value = json.loads(reply.body)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def clean_id(value: Any) -> str | None:
    """A provider's message id, or None when `value` is not a plausible one."""
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def clean_code(value: Any) -> str | None:
    """A provider's error code (an int or a short token) as a string, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        value = str(value)
    return value if isinstance(value, str) and _CODE.fullmatch(value) else None


def clean_text(value: Any) -> str | None:
    """The provider's words on one line, cut; None when not text."""
    if not isinstance(value, str):
        return None
    line = " ".join("".join(c if c.isprintable() else " " for c in value).split())
    return line[:MAX_MESSAGE_CHARS] or None


def body_text(reply: Reply) -> str | None:
    """The start of the body as text, for an answer with no documented message."""
    return clean_text(reply.body[:MAX_MESSAGE_CHARS].decode("utf-8", "replace"))


def is_success(reply: Reply) -> bool:
    return 200 <= reply.status < 300


def accepted_or_malformed(reply: Reply, provider_id: str | None) -> ProviderAnswer:
    """A success answer: the id, or malformed when the documented id is missing."""
    if provider_id is None:
        return ProviderAnswer(message=body_text(reply), malformed=True)
    return ProviderAnswer(provider_message_id=provider_id)
