"""HTTP provider transport on httpx: a Resend-style JSON API.

One email is one ``POST {base_url}/emails`` with ``from``, ``to``, ``subject``,
``text``, ``html``, ``headers`` (carrying the stored Message-ID) and ``tags``
(the intent's reference, ``outbox_ref``, which Resend's events bring back), an
``Authorization: Bearer <key>`` header and the stored idempotency key in
``Idempotency-Key``, so a retry of an unknown outcome is deduplicated by the
provider inside its idempotency window. The provider's message id is the
``id`` of the JSON response.

The worker is told ``DATA_SENT`` (and waits for it to be stored) just before
the first byte of the request leaves the process: httpx's trace events say
exactly when the connection is opened and when the request starts going out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from console.core.send_result import SendResult
from console.events.metadata import REFERENCE_KEY, reference_for
from console.transports.base import OutgoingEmail, StageCallback
from console.vocabulary import CLAIMED, CONNECTING, DATA_SENT, REPLY_READ

PROTOCOL = "http"
DEFAULT_IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600.0
MAX_REPLY_TEXT = 500


def parse_retry_after(value: str | None, now_epoch_seconds: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, when.timestamp() - now_epoch_seconds)


class _Progress:
    """Follows httpx trace events and tells the worker each stage before it happens."""

    def __init__(self, email: OutgoingEmail, on_stage: StageCallback) -> None:
        self.email = email
        self.on_stage = on_stage
        self.stage = CLAIMED

    async def _advance(self, stage: str) -> None:
        await self.on_stage(self.email, stage)  # raises when the lease is lost: stop here
        self.stage = stage

    async def trace(self, event_name: str, info: dict[str, Any]) -> None:
        if event_name == "connection.connect_tcp.started" and self.stage == CLAIMED:
            await self._advance(CONNECTING)
        elif event_name.endswith(".send_request_headers.started") and self.stage != DATA_SENT:
            await self._advance(DATA_SENT)


class HttpTransport:
    """Send emails through a Resend-style HTTP API with idempotency keys."""

    protocol = PROTOCOL
    honours_idempotency_keys = True  # the provider deduplicates a key inside its window

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout_seconds: float = 30.0,
        idempotency_window_seconds: float = DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = base_url.rstrip("/") + "/emails"
        self._api_key = api_key
        self.timeout_seconds = timeout_seconds
        self.idempotency_window_seconds = idempotency_window_seconds
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show the key
        return f"HttpTransport({self.endpoint})"

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
        }

    def _key_honoured(self, email: OutgoingEmail) -> bool:
        """Whether the provider will deduplicate a retry of this email's request."""
        age_seconds = self._clock() - email.created_at_epoch
        return self.honours_idempotency_keys and age_seconds < self.idempotency_window_seconds

    def _http_client(self) -> httpx.AsyncClient:
        """One pooled client per event loop (connections cannot move between loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            timeout = httpx.Timeout(self.timeout_seconds)
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
            self._client_loop = loop
        return self._client

    async def send(self, email: OutgoingEmail, on_stage: StageCallback) -> SendResult:
        """POST `email`; report how far the request got and what the provider answered."""
        started = time.perf_counter()
        progress = _Progress(email, on_stage)
        key_honoured = self._key_honoured(email)
        try:
            client = self._http_client()
            request = client.build_request(
                "POST",
                self.endpoint,
                json=self.payload(email),
                headers=self.headers(email),
                extensions={"trace": progress.trace},
            )
            response = await client.send(request)
        except Exception as error:  # noqa: BLE001 - every failure becomes a result
            return SendResult(
                stage=progress.stage,
                protocol=PROTOCOL,
                error=f"{type(error).__name__}: {error}"[:MAX_REPLY_TEXT],
                error_type=type(error).__name__,
                duration_ms=_elapsed_ms(started),
                idempotency_honoured=key_honoured,
            )
        return SendResult(
            stage=REPLY_READ,
            protocol=PROTOCOL,
            code=response.status_code,
            reply_text=response.text[:MAX_REPLY_TEXT] or response.reason_phrase,
            provider_message_id=_provider_id(response),
            retry_after_seconds=parse_retry_after(
                response.headers.get("Retry-After"), self._clock()
            ),
            duration_ms=_elapsed_ms(started),
            idempotency_honoured=key_honoured,
        )

    async def close(self) -> None:
        """Close the pooled connections."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()


def _provider_id(response: httpx.Response) -> str | None:
    if not response.is_success:
        return None
    try:
        provider_id = response.json().get("id")
    except (ValueError, AttributeError):
        return None
    return str(provider_id)[:255] if provider_id else None


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
