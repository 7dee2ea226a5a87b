"""Reconcile an ambiguous intent: mark it accepted, resend it as it was, or dead-letter it.

The compare-and-set and audit entry of ``console.store.actions``; never commits.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.orm import Session

from console.models import utcnow
from console.store.actions import (
    ActionRefused,
    ActionResult,
    act,
    due_now_values,
    load_intent,
    refuse_unless,
    required_reason,
)
from console.vocabulary import AMBIGUOUS, DEAD, SUBMITTED

MAX_PROVIDER_ID_LENGTH = 255
RESOLUTIONS = ("accepted", "resend", "dead")


def reconcile(
    session: Session,
    intent_id: int,
    *,
    resolution: str,
    actor: str,
    reason: str,
    provider_message_id: str | None = None,
    expected_status: str | None = AMBIGUOUS,
    expected_version: str | None = None,
    now: dt.datetime | None = None,
) -> ActionResult:
    """Resolve an ambiguous intent: mark it accepted, resend it as it was, or dead-letter it.

    `expected_version` is the version of the intent the operator decided on: a
    resend, a retry or a provider event since then refuses (StaleAction), so a
    stale tab never orders a second resend.
    """
    now = now or utcnow()
    if resolution not in RESOLUTIONS:
        raise ActionRefused("resolution_unknown", resolution=resolution, resolutions=RESOLUTIONS)
    reason = required_reason(reason)
    provider_message_id = (provider_message_id or "").strip() or None
    if provider_message_id and len(provider_message_id) > MAX_PROVIDER_ID_LENGTH:
        raise ActionRefused("provider_id_too_long", limit=MAX_PROVIDER_ID_LENGTH)
    row = load_intent(session, intent_id, expected_status, now, expected_version)
    refuse_unless(row, (AMBIGUOUS,), "reconcile")
    values = _resolved_values(resolution, actor, now, provider_message_id)
    details: dict[str, Any] = {"resolution": resolution}
    if "provider_message_id" in values:
        details["provider_message_id"] = provider_message_id
    return act(
        session,
        row,
        action=f"reconcile_{resolution}",
        values=values,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
    )


def _resolved_values(
    resolution: str, actor: str, now: dt.datetime, provider_message_id: str | None
) -> dict[str, Any]:
    """The intent's new values for `resolution`: submitted, pending and due now, or dead."""
    if resolution == "accepted":
        values: dict[str, Any] = dict(
            status=SUBMITTED,
            submitted_at=now,
            status_reason=f"marked accepted by {actor}",
            lease_token=None,
            lease_expires_at=None,
        )
        if provider_message_id:
            values["provider_message_id"] = provider_message_id
        return values
    if resolution == "resend":
        return due_now_values(now, f"resend ordered by {actor}")
    return dict(status=DEAD, status_reason=f"dead-lettered by {actor}")
