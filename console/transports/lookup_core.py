"""Ask a provider whether it has a message: one bounded GET, read as untrusted input.

A provider module gives a ``LookupApi``: the request for a ``Question`` and how
its answer becomes a ``Finding`` (found, with the provider's facts as
``ReportedEvent``s; not found; or failed). ``ProviderLookup`` sends it and never
raises: a refused, failed, slow, oversized or strange answer is ``FAILED``; it
counts the failures in a row since the provider last answered.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import httpx

from console.core.asking import FAILED, FOUND, NOT_FOUND, Question
from console.events import ReportedEvent
from console.transports.answers import Reply, clean_text

MAX_LOOKUP_BYTES = 256 * 1024  # a page of at most 100 records of a few hundred bytes


@dataclasses.dataclass(frozen=True)
class Finding:
    """What the provider said about one message."""

    said: str  # console.core.asking: FOUND, NOT_FOUND or FAILED
    events: tuple[ReportedEvent, ...] = ()
    detail: str = ""

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


class ProviderLookup:
    """Ask one provider's lookup API about ambiguous sends, one question at a time."""

    def __init__(self, api: LookupApi, *, timeout_seconds: float = 10.0) -> None:
        self.api = api
        self.provider = api.provider
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_seconds), follow_redirects=False)
        self.failures_in_a_row = 0
        self.last_failure = ""

    def __repr__(self) -> str:  # never show a key
        return f"ProviderLookup({self.api.endpoint})"

    def ask(self, question: Question) -> Finding:
        """The provider's answer about `question`'s message; FAILED rather than raising."""
        finding = self._answer(question)
        if finding.said == FAILED:
            self.failures_in_a_row += 1
            self.last_failure = finding.detail
        else:
            self.failures_in_a_row = 0
        return finding

    def _answer(self, question: Question) -> Finding:
        try:
            reply = self._get(*self.api.request(question))
        except Exception as error:  # noqa: BLE001 - every failure is a finding
            return Finding(FAILED, detail=f"{type(error).__name__}: {error}"[:300])
        if reply.status != 200:
            said = clean_text(reply.body[:200].decode("utf-8", "replace")) or reply.reason_phrase
            return Finding(FAILED, detail=f"{self.provider} answered {reply.status}: {said}")
        try:
            return self.api.finding(reply, question)
        except Exception as error:  # noqa: BLE001 - a strange answer is a failed lookup
            return Finding(FAILED, detail=f"unreadable answer ({type(error).__name__})")

    def _get(self, url: str, headers: dict[str, str]) -> Reply:
        headers = {**headers, "Accept-Encoding": "identity"}
        with self._client.stream("GET", url, headers=headers) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_LOOKUP_BYTES:
                    break
            body = b"".join(chunks)
            complete = size <= MAX_LOOKUP_BYTES
            status, reason = response.status_code, response.reason_phrase
            return Reply(status, response.headers, body[:MAX_LOOKUP_BYTES], complete, reason)

    def close(self) -> None:
        self._client.close()
