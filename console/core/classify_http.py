"""HTTP provider responses to outcomes, with the idempotency window (docs/provider-events.md).

- 2xx: accepted; the provider's message id is in the body. A 2xx whose body is
  not the provider's documented answer (``MALFORMED_ANSWER``) proves nothing:
  it is an unknown outcome, like a 500.
- 429, 502, 503, 504, or a failure before the request was sent: transient,
  honouring Retry-After.
- 409 to a request whose idempotency key is honoured: transient (the first
  request with that key is still in progress at the provider).
- 400, 401, 403, 404, 422: permanent; 401 and 403 also alert (our key or
  account, not the recipient). Any other 4xx, 1xx or 3xx: permanent, and alert.
- 500 (any other 5xx), a read timeout or a reset after the request was sent:
  transient while a retry with the same idempotency key is deduplicated by the
  provider (the intent is younger than the provider's window), else ambiguous.

Pure: no IO, nothing from Flask or the database.
"""

from __future__ import annotations

from console.core.outcomes import Classification
from console.core.send_result import SendResult, handed_over
from console.vocabulary import ACCEPTED, AMBIGUOUS, PERMANENT, TRANSIENT

DEFAULT_IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600.0
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})
ALERT_STATUSES = frozenset({401, 403})  # our key or account, not the recipient
CONFLICT = 409  # e.g. Resend: a request with the same idempotency key is still in progress
# error_type of an answer whose body is not what the provider documents (or too large)
MALFORMED_ANSWER = "MalformedAnswer"
_DETAIL_LIMIT = 200


def retry_is_deduplicated(
    *, key_honoured: bool, intent_age_seconds: float, idempotency_window_seconds: float
) -> bool:
    """Whether resending with the same idempotency key cannot make a second message."""
    return key_honoured and 0 <= intent_age_seconds < idempotency_window_seconds


def classify_http(
    result: SendResult,
    *,
    intent_age_seconds: float | None = None,
    idempotency_window_seconds: float = DEFAULT_IDEMPOTENCY_WINDOW_SECONDS,
) -> Classification:
    """Return the outcome of one HTTP provider request.

    The HTTP transport sets ``result.idempotency_honoured`` only when the intent is
    inside the provider's window, so the worker passes no age; given
    `intent_age_seconds`, the window is judged here instead.
    """
    code = result.code
    retry_safe = result.idempotency_honoured
    if intent_age_seconds is not None:
        retry_safe = retry_is_deduplicated(
            key_honoured=result.idempotency_honoured,
            intent_age_seconds=intent_age_seconds,
            idempotency_window_seconds=idempotency_window_seconds,
        )
    if code is None and not handed_over(result.stage):
        return _transient("the request was not sent", result)
    if code is None or (code >= 500 and code not in TRANSIENT_STATUSES):
        summary = "no complete response" if code is None else "provider error"
        return _unknown(summary, result, retry_safe)
    if 200 <= code < 300 and result.error_type == MALFORMED_ANSWER:
        return _unknown(
            "a success status without the provider's documented answer", result, retry_safe
        )
    if 200 <= code < 300:
        return Classification(ACCEPTED, reason_line("accepted", result))
    if code in TRANSIENT_STATUSES:
        return _transient("the provider asked to retry later", result)
    if code == CONFLICT and retry_safe:
        return _transient("the provider is still processing this idempotency key", result)
    if code in PERMANENT_STATUSES:
        refused = reason_line("the provider refused the request", result)
        return Classification(PERMANENT, refused, alert=code in ALERT_STATUSES)
    return Classification(PERMANENT, reason_line("unexpected response", result), alert=True)


def _transient(summary: str, result: SendResult) -> Classification:
    return Classification(
        TRANSIENT, reason_line(summary, result), retry_after_seconds=result.retry_after_seconds
    )


def _unknown(summary: str, result: SendResult, retry_safe: bool) -> Classification:
    """The provider may have taken the message: retry only if it would deduplicate."""
    if retry_safe:
        return _transient(f"{summary}; a retry with the same idempotency key is safe", result)
    return Classification(AMBIGUOUS, reason_line(f"{summary}; the provider may have it", result))


def reason_line(summary: str, result: SendResult) -> str:
    """One short line for the timeline: status, what it means, and the provider's words."""
    parts = [str(result.code)] if result.code is not None else []
    parts.append(f"{summary} at {result.stage}")
    detail = result.reply_text if result.code is not None else result.error
    if detail:
        parts.append(f"({' '.join(detail.split())[:_DETAIL_LIMIT]})")
    return " ".join(parts)
