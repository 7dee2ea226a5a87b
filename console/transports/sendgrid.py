"""SendGrid's send API: ``POST {base_url}/v3/mail/send`` with a bearer key.

The JSON body has one personalization (the recipient), ``from``, ``subject``,
``content`` (text, then HTML), the stored Message-ID in ``headers`` and our
reference in ``custom_args`` (SendGrid's events bring it back). SendGrid
answers 202 with an empty body and the message id in ``X-Message-Id``; a
refusal is ``{"errors": [{"message", "field", "help"}]}``
(https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send). An
EU subuser sends through ``SENDGRID_EU_URL``. SendGrid takes no idempotency key.
"""

from __future__ import annotations

import json
from email.utils import parseaddr
from typing import Any

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

SENDGRID_URL = "https://api.sendgrid.com"
SENDGRID_EU_URL = "https://api.eu.sendgrid.com"
_ERRORS_SHOWN = 3


class SendGridApi:
    """SendGrid's send request and answer."""

    protocol = "http/sendgrid"
    honours_idempotency_keys = False

    def __init__(self, base_url: str, api_key: str) -> None:
        self.endpoint = base_url.rstrip("/") + "/v3/mail/send"
        self._api_key = api_key

    def payload(self, email: OutgoingEmail) -> dict[str, Any]:
        sender: dict[str, str] = {"email": email.envelope_from}
        name = parseaddr(email.mail_from)[0]
        if name:
            sender["name"] = name
        content = [{"type": "text/plain", "value": email.text}]
        if email.html is not None:
            content.append({"type": "text/html", "value": email.html})
        return {
            "personalizations": [{"to": [{"email": email.recipient}]}],
            "from": sender,
            "subject": email.subject,
            "content": content,
            "headers": {"Message-ID": email.message_id},
            "custom_args": {REFERENCE_KEY: reference_for(email.intent_id, email.message_id)},
        }

    def request(self, email: OutgoingEmail) -> ProviderRequest:
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        return ProviderRequest(self.endpoint, headers, json.dumps(self.payload(email)).encode())

    def answer(self, reply: Reply) -> ProviderAnswer:
        if is_success(reply):
            return accepted_or_malformed(reply, clean_id(reply.headers.get("X-Message-Id")))
        return ProviderAnswer(message=_errors_text(reply))


def _errors_text(reply: Reply) -> str | None:
    """The messages of SendGrid's ``errors`` list, or the start of the body."""
    errors = (json_object(reply) or {}).get("errors")
    if not isinstance(errors, list):
        return body_text(reply)
    messages = [e.get("message") for e in errors[:_ERRORS_SHOWN] if isinstance(e, dict)]
    return clean_text("; ".join(m for m in messages if isinstance(m, str))) or body_text(reply)
