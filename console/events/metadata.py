"""Our reference in a provider's metadata channel, and how an event brings it back; pure.

Every provider returns, in its events, metadata the message carried: Postmark
``Metadata``, Mailgun ``user-variables``, SendGrid's unique (custom) args,
SES message tags (``mail.tags``), Resend ``tags``. The console puts one entry
there, ``outbox_ref``, whose value names the intent: ``<intent id>-<check>``,
the check being the first 12 hex digits of the SHA-256 of its Message-ID. It
is made of ASCII letters, digits and a dash only, as SES and Resend require of
a tag, and fits Postmark's 80 characters. The check tells this database's
intent from another with the same id (another installation, a database
recreated): a reference whose check does not match is not used.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

REFERENCE_KEY = "outbox_ref"
SES, POSTMARK, MAILGUN, SENDGRID, RESEND = "ses", "postmark", "mailgun", "sendgrid", "resend"
PROVIDERS = (SES, POSTMARK, MAILGUN, SENDGRID, RESEND)
CHECK_DIGITS = 12
_REFERENCE = re.compile(rf"([1-9][0-9]{{0,18}})-([0-9a-f]{{{CHECK_DIGITS}}})")


def check_of(message_id: str) -> str:
    """The check digits of a Message-ID."""
    return hashlib.sha256(message_id.encode("utf-8")).hexdigest()[:CHECK_DIGITS]


def reference_for(intent_id: int, message_id: str) -> str:
    """The reference a message of intent `intent_id` carries."""
    return f"{intent_id}-{check_of(message_id)}"


def parse_reference(value: Any) -> tuple[int, str] | None:
    """(intent id, check) of a reference, or None when `value` is not one."""
    if not isinstance(value, str):
        return None
    match = _REFERENCE.fullmatch(value.strip())
    return (int(match.group(1)), match.group(2)) if match else None


def names_intent(reference: str, intent_id: int, message_id: str) -> bool:
    """Whether `reference` is the one a message of this intent carried."""
    parsed = parse_reference(reference)
    return parsed is not None and parsed == (intent_id, check_of(message_id))


def reference_in(entries: Any) -> str | None:
    """Our reference among a provider's metadata: a mapping (whose value may be a list of
    one, as SES writes tags) or a list of ``{"name", "value"}`` pairs; None when absent."""
    if isinstance(entries, list):
        pairs = (e for e in entries if isinstance(e, dict) and e.get("name") == REFERENCE_KEY)
        entries = {REFERENCE_KEY: next((pair.get("value") for pair in pairs), None)}
    if not isinstance(entries, dict):
        return None
    value = entries.get(REFERENCE_KEY)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value.strip() if parse_reference(value) else None
