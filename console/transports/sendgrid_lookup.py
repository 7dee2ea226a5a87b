"""Ask SendGrid's Email Activity API whether it has a message, by our reference in its custom args.

``GET {base_url}/v3/messages?limit=...&query=(unique_args['outbox_ref']="...") AND
to_email="..."`` with a bearer key answers ``{"messages": [{"msg_id", "to_email",
"status", "last_event_time", ...}]}``
(https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages).
The API comes with a paid add-on of the account (additional email activity
history, 30 days) and a key with Email Activity access; without them SendGrid
refuses the request and the lookup fails. A message carrying our reference is
found: SendGrid took it (``processed``, ``delivered`` or ``not_delivered``), which
settles the send as its ``processed`` event would; its later events refine it.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from console.core.asking import Question
from console.events import ACCEPTED, ReportedEvent
from console.events.metadata import REFERENCE_KEY, reference_for
from console.transports.answers import Reply, clean_id, clean_text, json_object
from console.transports.lookup_core import FAILED, Finding

SOURCE = "sendgrid"
PAGE = 10  # our reference names one message; a few more only if SendGrid lists it twice
_PROVIDER_ID = re.compile(r"\.(filter|recvd)")  # msg_id = the X-Message-Id, then its route
_QUOTED = re.compile(r'[^"\\\x00-\x1f]{1,320}')  # what a query may quote, here an address


class SendGridLookupApi:
    """The Email Activity of one SendGrid account (or subuser)."""

    provider = "SendGrid"

    def __init__(self, base_url: str, api_key: str) -> None:
        self.endpoint = base_url.rstrip("/") + "/v3/messages"
        self._api_key = api_key

    def request(self, question: Question) -> tuple[str, dict[str, str]]:
        if not _QUOTED.fullmatch(question.recipient):
            raise ValueError("the recipient cannot be quoted in SendGrid's query")
        reference = reference_for(question.intent_id, question.message_id)
        conditions = f"(unique_args['{REFERENCE_KEY}']=\"{reference}\")"
        query = {"limit": PAGE, "query": f'{conditions} AND to_email="{question.recipient}"'}
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json"}
        return f"{self.endpoint}?{urlencode(query)}", headers

    def finding(self, reply: Reply, question: Question) -> Finding:
        messages = (json_object(reply) or {}).get("messages")
        if not isinstance(messages, list):
            return Finding(FAILED, detail="the answer is not SendGrid's Email Activity")
        reference = reference_for(question.intent_id, question.message_id)
        events = tuple(
            _event(m, question, reference) for m in messages[:PAGE] if _is_ours(m, question)
        )
        return Finding.of("SendGrid", events)


def _is_ours(message: Any, question: Question) -> bool:
    """A listed message with a plausible id, to our recipient (the query named our reference)."""
    if not isinstance(message, dict) or clean_id(message.get("msg_id")) is None:
        return False
    to_email = message.get("to_email")
    return isinstance(to_email, str) and to_email.lower() == question.recipient.lower()


def _event(message: dict[str, Any], question: Question, reference: str) -> ReportedEvent:
    msg_id = clean_id(message["msg_id"]) or ""
    provider_id = _PROVIDER_ID.split(msg_id)[0] or msg_id
    status = (clean_text(message.get("status")) or "unknown")[:40]
    return ReportedEvent(
        source=SOURCE,
        source_event_id=f"lookup:{msg_id}",
        event_type=ACCEPTED,
        recipient=question.recipient,
        diagnostic=f"settled by asking SendGrid (status {status})",
        provider_message_id=provider_id,
        other_provider_ids=(msg_id,) if msg_id != provider_id else (),
        message_id=question.message_id,
        payload={"msg_id": msg_id, "status": status},
        reference=reference,
    )
