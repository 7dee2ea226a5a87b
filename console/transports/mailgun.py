"""Mailgun's send API: ``POST {base_url}/v3/{domain}/messages``, basic auth ``api:<key>``.

A form (``application/x-www-form-urlencoded``) with ``from``, ``to``,
``subject``, ``text``, ``html``, the stored Message-ID as ``h:Message-Id`` and
our reference as the variable ``v:outbox_ref`` (Mailgun's events bring it back
in ``user-variables``). Mailgun answers ``{"id": "<...>", "message": "Queued.
Thank you."}``; a refusal is ``{"message": ...}`` or plain text
(https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages,
https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses).
The id is stored without its angle brackets, as Mailgun's events name it.
A domain in the EU region is reached at ``MAILGUN_EU_URL``. Mailgun takes no
idempotency key.
"""

from __future__ import annotations

import base64
from urllib.parse import quote, urlencode

from console.events.metadata import REFERENCE_KEY, reference_for
from console.transports.answers import (
    ProviderAnswer,
    Reply,
    accepted_or_malformed,
    body_text,
    clean_id,
    clean_text,
    is_success,
    json_object,
)
from console.transports.base import OutgoingEmail
from console.transports.http_core import ProviderRequest

MAILGUN_URL = "https://api.mailgun.net"
MAILGUN_EU_URL = "https://api.eu.mailgun.net"


class MailgunApi:
    """Mailgun's send request and answer."""

    protocol = "http/mailgun"
    honours_idempotency_keys = False

    def __init__(self, base_url: str, api_key: str, domain: str) -> None:
        self.endpoint = f"{base_url.rstrip('/')}/v3/{quote(domain, safe='')}/messages"
        credentials = base64.b64encode(f"api:{api_key}".encode()).decode()
        self._authorization = f"Basic {credentials}"

    def fields(self, email: OutgoingEmail) -> list[tuple[str, str]]:
        fields = [
            ("from", email.mail_from),
            ("to", email.recipient),
            ("subject", email.subject),
            ("text", email.text),
        ]
        if email.html is not None:
            fields.append(("html", email.html))
        fields.append(("h:Message-Id", email.message_id))
        fields.append((f"v:{REFERENCE_KEY}", reference_for(email.intent_id, email.message_id)))
        return fields

    def request(self, email: OutgoingEmail) -> ProviderRequest:
        headers = {
            "Authorization": self._authorization,
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        return ProviderRequest(self.endpoint, headers, urlencode(self.fields(email)).encode())

    def answer(self, reply: Reply) -> ProviderAnswer:
        body = json_object(reply)
        if is_success(reply):
            provider_id = clean_id((body or {}).get("id"))
            return accepted_or_malformed(reply, provider_id.strip("<>") if provider_id else None)
        message = clean_text(body.get("message")) if body else body_text(reply)
        return ProviderAnswer(message=message)
