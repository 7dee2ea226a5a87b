"""The HTTP core every provider transport shares, on httpx: one request, one bounded answer.

A provider module gives a ``ProviderApi``: the request for an email (its URL,
headers and exact body bytes) and how to read the provider's answer. This core
sends it on a pooled connection and tells the worker ``DATA_SENT`` (waiting for
it to be stored) just before the first byte of the request leaves the process:
httpx's trace events say exactly when the connection is opened and when the
request starts going out. It reads at most ``MAX_ANSWER_BYTES`` of the answer
and never raises for a send failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import re
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from console.core.classify_http import MALFORMED_ANSWER
from console.core.send_result import SendResult
from console.transports.answers import ProviderAnswer, Reply
from console.transports.base import OutgoingEmail, StageCallback
from console.vocabulary import CLAIMED, CONNECTING, DATA_SENT, REPLY_READ

DEFAULT_IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600.0
MAX_REPLY_TEXT = 500
MAX_ANSWER_BYTES = 64 * 1024  # a provider's answer to one send is well under 1 KiB


@dataclasses.dataclass(frozen=True)
class ProviderRequest:
    """One request to a provider's send endpoint, body bytes included (signers need them)."""

    url: str
    headers: dict[str, str]
    content: bytes


class ProviderApi(Protocol):
    """What one provider module knows: its request and how to read its answer."""

    protocol: str  # which rows of the classifier apply, e.g. "http/postmark"
    endpoint: str
    honours_idempotency_keys: bool

    def request(self, email: OutgoingEmail) -> ProviderRequest: ...

    def answer(self, reply: Reply) -> ProviderAnswer: ...


_DELAY_SECONDS = re.compile(r"[0-9]+")
_HTTP_DATE = re.compile(r"[A-Za-z0-9 ,:+-]{1,64}")
MAX_RETRY_AFTER_SECONDS = 10.0**9  # finite: the retry policy caps it further


def parse_retry_after(value: str | None, now_epoch_seconds: float) -> float | None:
    """Seconds to wait from a Retry-After header (RFC 9110 delay-seconds or an HTTP-date)."""
    value = (value or "").strip(" \t")
    if _DELAY_SECONDS.fullmatch(value):
        significant = value.lstrip("0")
        if len(significant) > len(str(int(MAX_RETRY_AFTER_SECONDS))):
            return MAX_RETRY_AFTER_SECONDS
        return min(float(int(significant or "0")), MAX_RETRY_AFTER_SECONDS)
    if not _HTTP_DATE.fullmatch(value):
        return None
    try:
        when = parsedate_to_datetime(value)
        seconds = when.replace(tzinfo=when.tzinfo or dt.UTC).timestamp() - now_epoch_seconds
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS)


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


class ProviderTransport:
    """Send emails through one provider's HTTP API (``api``)."""

    def __init__(
        self,
        api: ProviderApi,
        *,
        timeout_seconds: float = 30.0,
        idempotency_window_seconds: float = DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.protocol = api.protocol
        self.timeout_seconds = timeout_seconds
        self.idempotency_window_seconds = idempotency_window_seconds
        self._clock = clock
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:  # never show a key
        return f"{type(self).__name__}({self.api.endpoint})"

    @property
    def honours_idempotency_keys(self) -> bool:
        return self.api.honours_idempotency_keys

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
        """Send `email`; report how far the request got and what the provider answered."""
        started = time.perf_counter()
        progress = _Progress(email, on_stage)
        key_honoured = self._key_honoured(email)
        try:
            reply = await self._exchange(self.api.request(email), progress)
            return self._read_answer(reply, started, key_honoured)
        except Exception as error:  # noqa: BLE001 - every failure becomes this send's result
            return SendResult(
                stage=progress.stage,
                protocol=self.protocol,
                error=f"{type(error).__name__}: {error}"[:MAX_REPLY_TEXT],
                error_type=type(error).__name__,
                duration_ms=_elapsed_ms(started),
                idempotency_honoured=key_honoured,
            )

    def _read_answer(self, reply: Reply, started: float, key_honoured: bool) -> SendResult:
        """What the provider's answer says, each value read by the provider's own parser."""
        answer = self.api.answer(reply)
        return SendResult(
            stage=REPLY_READ,
            protocol=self.protocol,
            code=reply.status,
            reply_text=_reply_text(answer, reply),
            provider_message_id=answer.provider_message_id,
            error_type=MALFORMED_ANSWER if answer.malformed else answer.error_code,
            retry_after_seconds=parse_retry_after(reply.headers.get("Retry-After"), self._clock()),
            duration_ms=_elapsed_ms(started),
            idempotency_honoured=key_honoured,
        )

    async def _exchange(self, outgoing: ProviderRequest, progress: _Progress) -> Reply:
        """Send the request and read at most MAX_ANSWER_BYTES of the answer, in time."""
        client = self._http_client()
        request = client.build_request(
            "POST",
            outgoing.url,
            content=outgoing.content,
            headers={**outgoing.headers, "Accept-Encoding": "identity"},
            extensions={"trace": progress.trace},
        )
        async with asyncio.timeout(self.timeout_seconds * 2):  # a slow trickle ends too
            response = await client.send(request, stream=True)
            try:
                body, complete = await _read_capped(response)
            finally:
                await response.aclose()
        return Reply(response.status_code, response.headers, body, complete, response.reason_phrase)

    async def close(self) -> None:
        """Close the pooled connections."""
        client, self._client = self._client, None
        if client is not None and self._client_loop is asyncio.get_running_loop():
            await client.aclose()


async def _read_capped(response: httpx.Response) -> tuple[bytes, bool]:
    """The body up to MAX_ANSWER_BYTES, and whether that was all of it."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            return b"".join(chunks)[:MAX_ANSWER_BYTES], False
    return b"".join(chunks), True


def _reply_text(answer: ProviderAnswer, reply: Reply) -> str:
    """The provider's words for the timeline, led by its error code when it gave one."""
    words = answer.message or reply.reason_phrase or str(reply.status)
    if not reply.complete:
        words = f"an answer larger than {MAX_ANSWER_BYTES} bytes; {words}"
    if answer.error_code and not answer.malformed:
        words = f"{answer.error_code}: {words}"
    return words[:MAX_REPLY_TEXT]


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
