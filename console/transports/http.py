"""The Resend transport (the default HTTP provider) on the shared HTTP core.

One email is one ``POST {base_url}/emails`` with ``from``, ``to``, ``subject``,
``text``, ``html``, ``headers`` (carrying the stored Message-ID) and ``tags``
(the intent's reference, ``outbox_ref``, which Resend's events bring back), an
``Authorization: Bearer <key>`` header and the stored idempotency key in
``Idempotency-Key``, so a retry of an unknown outcome is deduplicated by the
provider inside its idempotency window. The provider's message id is the
``id`` of the JSON response; an error answer is ``{"statusCode", "name",
"message"}`` (https://resend.com/docs/api-reference/errors).
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
from console.transports.http_core import (
    DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
    MAX_REPLY_TEXT,
    ProviderRequest,
    ProviderTransport,
    parse_retry_after,
)

__all__ = [
    "DEFAULT_IDEMPOTENCY_WINDOW_SECONDS",
    "MAX_REPLY_TEXT",
    "PROTOCOL",
    "HttpTransport",
    "ResendApi",
    "parse_retry_after",
]

PROTOCOL = "http"  # Resend's answers are the generic HTTP rows of the classifier
RESEND_URL = "https://api.resend.com"


class ResendApi:
    """Resend's send request and answer."""

    protocol = PROTOCOL
    honours_idempotency_keys = True  # the provider deduplicates a key inside its window

    def __init__(self, base_url: str, api_key: str) -> None:
        self.endpoint = base_url.rstrip("/") + "/emails"
        self._api_key = api_key

    def payload(self, email: OutgoingEmail) -> dict[str, Any]:
        """The JSON body of the request for `email`."""
        body: dict[str, Any] = {
            "from": email.mail_from,
            "to": [email.recipient],
            "subject": email.subject,
            "text": email.text,
            "headers": {"Message-ID": email.message_id},
            "tags": [
                {"name": REFERENCE_KEY, "value": reference_for(email.intent_id, email.message_id)}
            ],
        }
        if email.html is not None:
            body["html"] = email.html
        return body

    def headers(self, email: OutgoingEmail) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Idempotency-Key": email.idempotency_key,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }

    def request(self, email: OutgoingEmail) -> ProviderRequest:
        content = json.dumps(self.payload(email)).encode()
        return ProviderRequest(self.endpoint, self.headers(email), content)

    def answer(self, reply: Reply) -> ProviderAnswer:
        body = json_object(reply) or {}
        if is_success(reply):
            return accepted_or_malformed(reply, clean_id(body.get("id")))
        return ProviderAnswer(
            error_code=clean_code(body.get("name")), message=clean_text(body.get("message"))
        )


class HttpTransport(ProviderTransport):
    """Send emails through Resend's HTTP API with idempotency keys."""

    def __init__(self, base_url: str, api_key: str, **options: Any) -> None:
        super().__init__(ResendApi(base_url, api_key), **options)

    @property
    def endpoint(self) -> str:
        return self.api.endpoint

    def payload(self, email: OutgoingEmail) -> dict[str, Any]:
        return self.api.payload(email)

    def headers(self, email: OutgoingEmail) -> dict[str, str]:
        return self.api.headers(email)
