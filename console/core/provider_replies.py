"""A native HTTP provider's answer to an outcome, by that provider's own table. Pure.

A table maps ``(HTTP status, provider error code)`` to a ``Row``; either half
may be ``None`` (any). The exact pair is looked up first, then the error code
whatever the status, then the status whatever the code. What no row names
(a timeout, a reset, an unlisted status) falls to the generic HTTP rows of
``classify_http``. A row whose outcome is ``ambiguous`` (the provider may have
the message) becomes ``transient`` when the request carried an idempotency key
the provider honours.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from console.core.blame import THROTTLING, THROTTLING_HTTP_STATUS
from console.core.classify_http import classify_http, reason_line
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.vocabulary import AMBIGUOUS, TRANSIENT


@dataclasses.dataclass(frozen=True)
class Row:
    """What one documented answer means."""

    outcome: str
    summary: str
    blamed: str | None = None  # console.core.blame: session, recipient, message, throttling
    alert: bool = False


Table = Mapping[tuple[int | None, str | None], Row]


def lookup(table: Table, status: int | None, error_code: str | None) -> Row | None:
    """The row for this answer: exact pair, then the code alone, then the status alone."""
    keys = [(status, error_code), (None, error_code), (status, None)]
    for key in keys:
        if key != (None, None) and key in table:
            return table[key]
    return None


def classify_provider(result: SendResult, table: Table) -> Classification:
    """Return the outcome of one request to the provider whose table this is."""
    row = lookup(table, result.code, result.error_type)
    if row is None:
        verdict = classify_http(result)
        if result.code == THROTTLING_HTTP_STATUS:
            return dataclasses.replace(verdict, blamed=THROTTLING)
        return verdict
    if row.outcome == AMBIGUOUS and result.idempotency_honoured:
        summary = f"{row.summary}; a retry with the same idempotency key is safe"
        return _verdict(dataclasses.replace(row, outcome=TRANSIENT, summary=summary), result)
    return _verdict(row, result)


def _verdict(row: Row, result: SendResult) -> Classification:
    retry_after = result.retry_after_seconds if row.outcome == TRANSIENT else None
    return Classification(
        row.outcome,
        reason_line(row.summary, result),
        alert=row.alert,
        retry_after_seconds=retry_after,
        blamed=row.blamed,
    )
