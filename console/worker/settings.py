"""The part of the product's settings the send loop needs."""

from __future__ import annotations

import dataclasses

from console.config import Settings
from console.core.backoff import Backoff
from console.core.classify import Overrides, parse_overrides
from console.core.lifecycle import RetryPolicy

# Intents a claim takes for each connection when CONSOLE_BATCH_SIZE is not set: every
# connection count then sends a batch in about the time one connection sends 50.
BATCH_PER_CONNECTION = 50


def batch_size_for(configured: int | None, connections: int) -> int:
    """The intents a claim takes: `configured` (CONSOLE_BATCH_SIZE), else
    ``BATCH_PER_CONNECTION`` for each of the worker's `connections`."""
    return configured if configured is not None else BATCH_PER_CONNECTION * max(1, connections)


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """The part of the product's settings the send loop needs."""

    mail_from: str
    retry: RetryPolicy
    batch_size: int = 50
    lease_seconds: float = 300.0
    concurrency: int = 1
    overrides: Overrides = Overrides()
    suppress_refused_mailboxes: bool = True
    provider: str | None = None  # CONSOLE_PROVIDER: its metadata header names the intent

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerSettings:
        backoff = Backoff(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_floor_seconds
        )
        return cls(
            mail_from=settings.mail_from,
            retry=RetryPolicy(backoff, settings.max_attempts, settings.max_age_seconds),
            batch_size=batch_size_for(settings.batch_size, settings.smtp_connections),
            lease_seconds=settings.lease_seconds,
            concurrency=settings.smtp_connections,
            overrides=parse_overrides(settings.classify_overrides),
            suppress_refused_mailboxes=settings.suppress_refused_mailboxes,
            provider=settings.provider,
        )
