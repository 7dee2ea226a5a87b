"""Ask a provider whether it has a message: bounded GETs under one deadline, untrusted answers.

A provider module gives a ``LookupApi``: the request for a ``Question`` and how
its answer becomes a ``Finding`` (found, with the provider's facts as
``ReportedEvent``s; not found; or failed); one that must confirm what it found
with further requests gives ``ask(get, question)`` instead. ``ProviderLookup``
sends them and never raises: a refused, failed, slow, oversized or strange
answer is ``FAILED``. Connecting and reading every answer of one lookup share
one deadline, however slowly the bytes come. It counts the failures in a row
since the provider last answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from console.core.asking import FAILED, FOUND, NOT_FOUND, Question
from console.events import ReportedEvent
from console.events.metadata import reference_for
from console.transports.answers import Reply, clean_text

if TYPE_CHECKING:
    import httpx

MAX_LOOKUP_BYTES = 256 * 1024  # a page of at most 100 records of a few hundred bytes

Get = Callable[[str, dict[str, str]], Awaitable[Reply]]


@dataclasses.dataclass(frozen=True)
class Finding:
    """What the provider said about one message."""

    said: str  # console.core.asking: FOUND, NOT_FOUND or FAILED
    events: tuple[ReportedEvent, ...] = ()
    detail: str = ""
    unanswered: bool = False  # FAILED because the provider gave no answer by the deadline

    @classmethod
    def of(cls, provider: str, events: tuple[ReportedEvent, ...]) -> Finding:
        """FOUND with `events`, or NOT_FOUND when `provider` listed none of ours."""
        if not events:
            return cls(NOT_FOUND, detail=f"{provider} has no record of it")
        return cls(FOUND, events, detail=f"found by asking {provider}")


class LookupApi(Protocol):
    provider: str  # the provider's name for people, e.g. "Postmark"
    endpoint: str

    def request(self, question: Question) -> tuple[str, dict[str, str]]: ...

    def finding(self, reply: Reply, question: Question) -> Finding: ...


def refused(provider: str, reply: Reply) -> Finding:
    """FAILED for an answer that is not a 200, with the provider's first words."""
    said = clean_text(reply.body[:200].decode("utf-8", "replace")) or reply.reason_phrase
    return Finding(FAILED, detail=f"{provider} answered {reply.status}: {said}")


def names_our_send(
    question: Question,
    *,
    reference: str | None,
    message_id: str | None = None,
    provider_id: str | None = None,
) -> bool:
    """Whether an answer's item names our reference, our Message-ID or the provider id we
    stored for the send, and no other reference."""
    if reference is not None:
        return reference == reference_for(question.intent_id, question.message_id)
    if message_id is not None and message_id == question.message_id:
        return True
    stored = question.provider_message_id
    return stored is not None and provider_id == stored


class ProviderLookup:
    """Ask one provider's lookup API about ambiguous sends, one question at a time."""

    def __init__(self, api: LookupApi, *, timeout_seconds: float = 10.0) -> None:
        self.api = api
        self.provider = api.provider
        self.deadline_seconds = timeout_seconds
        self.failures_in_a_row = 0
        self.last_failure = ""

    def __repr__(self) -> str:  # never show a key
        return f"ProviderLookup({self.api.endpoint})"

    def ask(self, question: Question) -> Finding:
        """The provider's answer about `question`'s message; FAILED rather than raising."""
        try:
            finding = asyncio.run(self._within_deadline(question))
        except Exception as error:  # noqa: BLE001 - every failure is a finding
            finding = Finding(FAILED, detail=f"{type(error).__name__}: {error}"[:300])
        if finding.said == FAILED:
            self.failures_in_a_row += 1
            self.last_failure = finding.detail
        else:
            self.failures_in_a_row = 0
        return finding

    async def _within_deadline(self, question: Question) -> Finding:
        """The finding, or FAILED and unanswered once the deadline has passed."""
        import httpx  # loaded by the first lookup: a process that asks none never needs it

        timeout = httpx.Timeout(self.deadline_seconds)
        try:
            async with asyncio.timeout(self.deadline_seconds):
                async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
                    return await self._asked(_getter(client), question)
        except TimeoutError:
            detail = f"{self.provider} gave no answer within {self.deadline_seconds:g} s"
            return Finding(FAILED, detail=detail, unanswered=True)

    async def _asked(self, get: Get, question: Question) -> Finding:
        asks = getattr(self.api, "ask", None)
        if asks is not None:
            return await asks(get, question)
        reply = await get(*self.api.request(question))
        if reply.status != 200:
            return refused(self.provider, reply)
        try:
            return self.api.finding(reply, question)
        except Exception as error:  # noqa: BLE001 - a strange answer is a failed lookup
            return Finding(FAILED, detail=f"unreadable answer ({type(error).__name__})")

    def close(self) -> None:
        """Nothing is held between lookups: each opens and closes its own connections."""


def _getter(client: httpx.AsyncClient) -> Get:
    async def get(url: str, headers: dict[str, str]) -> Reply:
        """GET `url`, reading at most MAX_LOOKUP_BYTES of the answer."""
        headers = {**headers, "Accept-Encoding": "identity"}
        async with client.stream("GET", url, headers=headers) as response:
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_LOOKUP_BYTES:
                    break
            body = b"".join(chunks)[:MAX_LOOKUP_BYTES]
            complete = size <= MAX_LOOKUP_BYTES
            status, reason = response.status_code, response.reason_phrase
            return Reply(status, response.headers, body, complete, reason)

    return get
