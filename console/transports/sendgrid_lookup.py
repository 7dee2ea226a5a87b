"""Ask SendGrid's Email Activity API whether it has a message, by our reference in its custom args.

``GET {base_url}/v3/messages?limit=...&query=(unique_args['outbox_ref']="...") AND
to_email="..."`` with a bearer key answers ``{"messages": [{"msg_id", "to_email",
"status", "last_event_time", ...}]}``
(https://www.twilio.com/docs/sendgrid/api-reference/email-activity/filter-all-messages).
That list does not carry the custom args, so each listed message to our
recipient is confirmed by its details (``GET {base_url}/v3/messages/{msg_id}``,
whose ``unique_args`` must name our reference): the query's filter alone proves
nothing. A listed ``msg_id`` whose part before its first dot is the
``X-Message-Id`` SendGrid answered our send with (when we stored one) needs no
details. The API comes with a paid add-on of the account (additional email
activity history, 30 days) and a key with Email Activity access; without them
SendGrid refuses the request and the lookup fails. A message so confirmed is
found: SendGrid took it (``processed``, ``delivered`` or ``not_delivered``),
which settles the send as its ``processed`` event would; its later events
refine it.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlencode

from console.core.asking import Question
from console.events import ACCEPTED, ReportedEvent
from console.events.metadata import REFERENCE_KEY, reference_for, reference_in
from console.transports.answers import Reply, clean_id, clean_text, json_object
from console.transports.lookup_core import FAILED, Finding, Get, names_our_send, refused

SOURCE = "sendgrid"
PAGE = 10  # our reference names one message; a few more only if SendGrid lists it twice
CONFIRMED_AT_MOST = 3  # details asked for, one request each, inside the lookup's deadline
MAX_UNIQUE_ARGS_CHARS = 4096
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

    def detail_request(self, msg_id: str) -> tuple[str, dict[str, str]]:
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json"}
        return f"{self.endpoint}/{quote(msg_id, safe='')}", headers

    def candidates(self, reply: Reply, question: Question) -> list[dict[str, Any]] | None:
        """The messages listed to our recipient (one per msg_id), or None when the answer is
        not the list."""
        messages = (json_object(reply) or {}).get("messages")
        if not isinstance(messages, list):
            return None
        listed = {m["msg_id"]: m for m in messages[:PAGE] if _is_ours(m, question)}
        return list(listed.values())[:CONFIRMED_AT_MOST]

    async def ask(self, get: Get, question: Question) -> Finding:
        """List the messages to our recipient, then keep those with the X-Message-Id we stored
        and those whose details name our reference."""
        reply = await get(*self.request(question))
        if reply.status != 200:
            return refused(self.provider, reply)
        listed = self.candidates(reply, question)
        if listed is None:
            return Finding(FAILED, detail="the answer is not SendGrid's Email Activity")
        confirmed = []
        for message in listed:
            msg_id = message["msg_id"]
            if names_our_send(question, reference=None, provider_id=_x_message_id(msg_id)):
                confirmed.append(_event(msg_id, message, question))
                continue
            details = await get(*self.detail_request(msg_id))
            if details.status not in (200, 404):
                return refused(self.provider, details)
            if details.status == 200 and self.names_our_reference(details, msg_id, question):
                confirmed.append(_event(msg_id, json_object(details) or {}, question))
        return Finding.of("SendGrid", tuple(confirmed))

    def names_our_reference(self, details: Reply, msg_id: str, question: Question) -> bool:
        """Whether these details are of `msg_id`, to our recipient, carrying our reference."""
        body = json_object(details) or {}
        if body.get("msg_id") != msg_id or not _is_ours(body, question):
            return False
        reference = reference_for(question.intent_id, question.message_id)
        return reference_in(_unique_args(body.get("unique_args"))) == reference


def _unique_args(value: Any) -> Any:
    """The custom args of a message's details: a JSON object, or one written as a string."""
    if not isinstance(value, str) or len(value) > MAX_UNIQUE_ARGS_CHARS:
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _is_ours(message: Any, question: Question) -> bool:
    """A message with a plausible id, to our recipient."""
    if not isinstance(message, dict) or clean_id(message.get("msg_id")) is None:
        return False
    to_email = message.get("to_email")
    return isinstance(to_email, str) and to_email.lower() == question.recipient.lower()


def _x_message_id(msg_id: str) -> str:
    """The X-Message-Id SendGrid answered the send with: its msg_id before the first dot."""
    return msg_id.partition(".")[0] or msg_id


def _event(msg_id: str, details: dict[str, Any], question: Question) -> ReportedEvent:
    reference = reference_for(question.intent_id, question.message_id)
    provider_id = _x_message_id(msg_id)
    status = (clean_text(details.get("status")) or "unknown")[:40]
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
