"""The alert webhook: a JSON POST of each transition, claimed, sent after commit.

A POST that fails is retried by a later cycle once its claim is older than
``WEBHOOK_RETRY_SECONDS``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from console.config import Settings
from console.models import utcnow
from console.state_tables import AlertState
from console.store import alerts
from console.store.alerts import RESOLVED

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

WEBHOOK_RETRY_SECONDS = 60.0


def webhook_payload(row: AlertState, due: str) -> dict[str, Any]:
    """Return the JSON body posted to the webhook for `row`."""
    return {
        "source": "outbox-console",
        "condition": row.condition,
        "state": due,
        "summary": row.summary,
        "details": row.details or {},
        "fired_at": row.fired_at.isoformat() if row.fired_at else None,
        "cleared_at": row.cleared_at.isoformat() if row.cleared_at and due == RESOLVED else None,
    }


Poster = Callable[..., "httpx.Response"]


def http_post(url: str, **options: Any) -> httpx.Response:
    """``httpx.post``, the client loaded on the first webhook (most processes send none)."""
    import httpx

    return httpx.post(url, **options)


def deliver_webhooks(
    session_factory: Callable[[], Session],
    settings: Settings,
    now: dt.datetime,
    post: Poster = http_post,
) -> tuple[int, int]:
    """POST every transition not yet delivered; return (sent, failed)."""
    stale_before = now - dt.timedelta(seconds=WEBHOOK_RETRY_SECONDS)
    sent = failed = 0
    for row in alerts.load_alerts_owing_webhook(session_factory):
        due = row.webhook_due
        if not alerts.claim_alert_webhook(session_factory, row.condition, due, now, stale_before):
            continue
        if _post(post, settings, webhook_payload(row, due)):
            alerts.mark_alert_notified(session_factory, row.condition, due, utcnow())
            sent += 1
        else:
            failed += 1
    return sent, failed


def _post(post: Poster, settings: Settings, payload: dict[str, Any]) -> bool:
    import httpx  # its errors; the poster has loaded it

    try:
        response = post(
            settings.alert_webhook_url,
            json=payload,
            timeout=settings.alert_webhook_timeout_seconds,
        )
    except httpx.HTTPError as exc:
        log.warning(
            "alert webhook unreachable",
            extra={"condition": payload["condition"], "error_type": type(exc).__name__},
        )
        return False
    if not response.is_success:
        log.warning(
            "alert webhook refused the alert",
            extra={"condition": payload["condition"], "code": response.status_code},
        )
    return response.is_success
