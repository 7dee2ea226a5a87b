"""Postmark's send API: ``POST {base_url}/email`` with the server token.

The body carries ``From``, ``To``, ``Subject``, ``TextBody``, ``HtmlBody``, the
stored Message-ID in ``Headers``, our reference in ``Metadata`` (which
Postmark's webhooks bring back) and the ``MessageStream``. Postmark answers
``{"To", "SubmittedAt", "MessageID", "ErrorCode", "Message"}``, ``ErrorCode``
0 when accepted; a refusal is a 422 (or 401) with ``{"ErrorCode", "Message"}``
(https://postmarkapp.com/developer/api/email-api,
https://postmarkapp.com/developer/api/overview#error-codes). Postmark takes no
idempotency key: a retry of an unknown outcome may send twice.
"""

from __future__ import annotations

import json
from typing import Any

from console.events.metadata import REFERENCE_KEY, reference_for
from console.transports.answers import (
    ProviderAnswer,
    Reply,
    accepted_or_malformed,
    clean_code,
    clean_id,
    clean_text,
    is_success,
    json_object,
)
from console.transports.base import OutgoingEmail
from console.transports.http_core import ProviderRequest

POSTMARK_URL = "https://api.postmarkapp.com"
DEFAULT_MESSAGE_STREAM = "outbound"  # the transactional stream every server has


class PostmarkApi:
    """Postmark's send request and answer."""

    protocol = "http/postmark"
    honours_idempotency_keys = False

    def __init__(
        self, base_url: str, server_token: str, message_stream: str = DEFAULT_MESSAGE_STREAM
    ) -> None:
        self.endpoint = base_url.rstrip("/") + "/email"
        self._server_token = server_token
        self.message_stream = message_stream

    def payload(self, email: OutgoingEmail) -> dict[str, Any]:
        body: dict[str, Any] = {
            "From": email.mail_from,
            "To": email.recipient,
            "Subject": email.subject,
            "TextBody": email.text,
            "Headers": [{"Name": "Message-ID", "Value": email.message_id}],
            "Metadata": {REFERENCE_KEY: reference_for(email.intent_id, email.message_id)},
            "MessageStream": self.message_stream,
        }
        if email.html is not None:
            body["HtmlBody"] = email.html
        return body

    def request(self, email: OutgoingEmail) -> ProviderRequest:
        headers = {
            "X-Postmark-Server-Token": self._server_token,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        return ProviderRequest(self.endpoint, headers, json.dumps(self.payload(email)).encode())

    def answer(self, reply: Reply) -> ProviderAnswer:
        body = json_object(reply) or {}
        code = clean_code(body.get("ErrorCode"))
        message = clean_text(body.get("Message"))
        if is_success(reply) and code not in (None, "0"):  # a refusal in a 200
            return ProviderAnswer(error_code=code, message=message)
        if is_success(reply):
            return accepted_or_malformed(reply, clean_id(body.get("MessageID")))
        return ProviderAnswer(error_code=code, message=message)
