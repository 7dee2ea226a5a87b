"""Ask Postmark's Messages API whether it has a message, by our reference in its metadata.

``GET {base_url}/messages/outbound?recipient=...&fromdate=...&metadata_outbox_ref=...``
with the server token answers ``{"TotalCount", "Messages": [{"MessageID",
"Status", "Metadata", "ReceivedAt", ...}]}``
(https://postmarkapp.com/developer/api/messages-api#outbound-message-search;
Postmark keeps 45 days by default). A message carrying our reference, or the
``MessageID`` we stored for the send (and no other reference), is found:
Postmark took it, which settles the send as its ``Delivery`` or ``Bounce``
events would later refine.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import urlencode

from console.core.asking import Question
from console.events import ACCEPTED, ReportedEvent
from console.events.metadata import REFERENCE_KEY, reference_for, reference_in
from console.transports.answers import Reply, clean_id, clean_text, json_object
from console.transports.lookup_core import FAILED, Finding, names_our_send

SOURCE = "postmark"
PAGE = 50
WINDOW_BEFORE = dt.timedelta(days=1)  # Postmark's dates are its own time zone's: be generous


class PostmarkLookupApi:
    """The outbound message search of one Postmark server."""

    provider = "Postmark"

    def __init__(self, base_url: str, server_token: str) -> None:
        self.endpoint = base_url.rstrip("/") + "/messages/outbound"
        self._server_token = server_token

    def request(self, question: Question) -> tuple[str, dict[str, str]]:
        query = {
            "count": PAGE,
            "offset": 0,
            "recipient": question.recipient,
            "fromdate": (question.attempted_at - WINDOW_BEFORE).strftime("%Y-%m-%d"),
            f"metadata_{REFERENCE_KEY}": reference_for(question.intent_id, question.message_id),
        }
        headers = {"X-Postmark-Server-Token": self._server_token, "Accept": "application/json"}
        return f"{self.endpoint}?{urlencode(query)}", headers

    def finding(self, reply: Reply, question: Question) -> Finding:
        body = json_object(reply)
        messages = body.get("Messages") if body else None
        if not isinstance(messages, list) or not isinstance(body.get("TotalCount"), int):
            return Finding(FAILED, detail="the answer is not Postmark's message search")
        reference = reference_for(question.intent_id, question.message_id)
        events = tuple(
            _event(m, question, reference) for m in messages[:PAGE] if _is_ours(m, question)
        )
        return Finding.of("Postmark", events)


def _is_ours(message: Any, question: Question) -> bool:
    """A message naming our reference, or the MessageID we stored and no other reference."""
    if not isinstance(message, dict) or clean_id(message.get("MessageID")) is None:
        return False
    reference = reference_in(message.get("Metadata"))
    return names_our_send(question, reference=reference, provider_id=clean_id(message["MessageID"]))


def _event(message: dict[str, Any], question: Question, reference: str) -> ReportedEvent:
    provider_id = clean_id(message["MessageID"])
    status = clean_text(message.get("Status")) or "unknown"
    return ReportedEvent(
        source=SOURCE,
        source_event_id=f"lookup:{provider_id}",
        event_type=ACCEPTED,
        recipient=question.recipient,
        diagnostic=f"settled by asking Postmark (status {status[:40]})",
        provider_message_id=provider_id,
        message_id=question.message_id,
        payload={"MessageID": provider_id, "Status": status[:40]},
        reference=reference,
    )
