"""Ask Mailgun's Events API what became of a message, by its Message-ID.

``GET {base_url}/v3/{domain}/events?message-id=...&begin=...&ascending=yes``
with basic auth answers ``{"items": [event, ...], "paging": {...}}``, each item
the same ``event-data`` its webhooks post
(https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/events;
30 days of data). The worker sends our Message-ID as ``h:Message-Id``, so the
message's events are found by it. An event is ours when it names our reference,
our Message-ID or the id Mailgun gave us for the send (and no other reference);
each is recorded as the webhook's would be
(the same event id, so a later webhook delivery of it is a duplicate).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
from urllib.parse import quote, urlencode

from console.core.asking import Question
from console.events import EventRejected, ReportedEvent
from console.events.mailgun import parse_event
from console.events.metadata import reference_for
from console.transports.answers import Reply, json_object
from console.transports.lookup_core import FAILED, Finding, names_our_send

PAGE = 100
WINDOW_BEFORE = dt.timedelta(hours=1)


class MailgunLookupApi:
    """The event log of one Mailgun domain."""

    provider = "Mailgun"

    def __init__(self, base_url: str, api_key: str, domain: str) -> None:
        self.endpoint = f"{base_url.rstrip('/')}/v3/{quote(domain, safe='')}/events"
        credentials = base64.b64encode(f"api:{api_key}".encode()).decode()
        self._authorization = f"Basic {credentials}"

    def request(self, question: Question) -> tuple[str, dict[str, str]]:
        query = {
            "message-id": question.message_id.strip("<>"),
            "begin": int((question.attempted_at - WINDOW_BEFORE).timestamp()),
            "ascending": "yes",
            "limit": PAGE,
        }
        headers = {"Authorization": self._authorization, "Accept": "application/json"}
        return f"{self.endpoint}?{urlencode(query)}", headers

    def finding(self, reply: Reply, question: Question) -> Finding:
        items = (json_object(reply) or {}).get("items")
        if not isinstance(items, list):
            return Finding(FAILED, detail="the answer is not Mailgun's event log")
        events = tuple(
            _as_ours(e, question) for e in map(_parsed, items[:PAGE]) if _about(e, question)
        )
        return Finding.of("Mailgun", events)


def _parsed(item: object) -> ReportedEvent | None:
    if not isinstance(item, dict):
        return None
    try:
        return parse_event({"event-data": item})
    except EventRejected:
        return None


def _about(event: ReportedEvent | None, question: Question) -> bool:
    """An event naming our reference, our Message-ID or the id we stored, and no other reference."""
    if event is None:
        return False
    return names_our_send(
        question,
        reference=event.reference,
        message_id=event.message_id,
        provider_id=event.provider_message_id,
    )


def _as_ours(event: ReportedEvent, question: Question) -> ReportedEvent:
    """The event, recorded against our message whichever of its names it gave."""
    reference = reference_for(question.intent_id, question.message_id)
    return dataclasses.replace(event, message_id=question.message_id, reference=reference)
