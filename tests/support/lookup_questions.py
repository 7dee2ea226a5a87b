"""The lookup question the provider-lookup tests ask, and the references that name ours or not."""

from __future__ import annotations

import datetime as dt

from console.events.metadata import reference_for
from console.transports.lookup_core import Question


def question_about(recipient: str = "amb@example.com", **fields) -> Question:
    """The question asked about intent 7's ambiguous send to `recipient`."""
    return Question(
        intent_id=7,
        message_id="<7.abc@shop.example.com>",
        recipient=recipient,
        template="welcome",
        attempted_at=dt.datetime(2026, 5, 20, 10, 0, tzinfo=dt.UTC),
        **fields,
    )


OUR_REFERENCE = reference_for(7, "<7.abc@shop.example.com>")
THEIR_REFERENCE = reference_for(8, "<8.other@shop.example.com>")
