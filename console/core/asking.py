"""What the provider's answer to "do you have this message?" does to an ambiguous intent. Pure.

- found: the provider's own record settles it, as its events would (accepted or
  delivered: submitted; rejected or bounced: as that event does);
- not found before ``horizon_seconds`` after the attempt: ask again later (a
  provider indexes what it accepted with a delay);
- not found after it: the template's ambiguity policy decides: ``resend`` sends
  it again (same Message-ID, same key), ``hold`` keeps it for an operator with
  a note that the provider has no record of it;
- the lookup itself failed: leave the intent as it was.

Only some providers can be asked by our reference: ``ANSWERING`` names them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from console.vocabulary import RESEND

FOUND, NOT_FOUND, FAILED = "found", "not_found", "failed"
RECORD, WAIT, RESEND_NOW, HOLD_NOTED, LEAVE = "record", "wait", "resend", "hold_noted", "leave"
# CONSOLE_PROVIDER → its name for people, for the providers whose API finds a message by
# our reference (Resend's finds one only by its own id; SES has no such API)
ANSWERING = {"postmark": "Postmark", "mailgun": "Mailgun", "sendgrid": "SendGrid"}


@dataclasses.dataclass(frozen=True)
class Question:
    """One ambiguous intent to ask the provider about."""

    intent_id: int
    message_id: str  # with angle brackets
    recipient: str
    template: str
    attempted_at: dt.datetime  # when its last attempt started (UTC)
    provider_message_id: str | None = None  # the provider's id we stored for it, if any


def after_asking(
    said: str, *, seconds_since_attempt: float, horizon_seconds: float, ambiguity_policy: str
) -> str:
    """The action for one answer: RECORD, WAIT, RESEND_NOW, HOLD_NOTED or LEAVE."""
    if said == FOUND:
        return RECORD
    if said == FAILED:
        return LEAVE
    if said != NOT_FOUND:
        raise ValueError(f"unknown answer {said!r}")
    if seconds_since_attempt < horizon_seconds:
        return WAIT
    return RESEND_NOW if ambiguity_policy == RESEND else HOLD_NOTED


def provider_that_answers(transport: str, provider: str | None) -> str | None:
    """The name of the provider that can be asked about an ambiguous send, or None."""
    return ANSWERING.get(provider or "") if transport == "http" else None
