"""Operators' actions on one intent: requeue, dead-letter, and the audited look at its message.

Each is the compare-and-set and audit entry of ``console.store.actions``; none commits. Bulk
actions are ``console.store.bulk_actions``, reconciliation ``console.store.reconciliation``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from console.core.whole_numbers import whole_number
from console.models import Intent, utcnow
from console.store.actions import (
    ActionRefused,
    ActionResult,
    act,
    due_now_values,
    load_intent,
    refuse_unless,
    required_reason,
)
from console.store.audit import audit_values, write_audit
from console.store.suppressions import is_suppressed
from console.vocabulary import DEAD, PENDING, REQUEUEABLE_STATUSES


@dataclasses.dataclass(frozen=True)
class RequeueResult(ActionResult):
    """A requeue done, and what will still keep the worker from sending the mail."""

    recipient_suppressed: bool = False  # the worker will hold it back
    past_max_age: bool = False  # older than its template's max age: the worker expires it again


def past_max_age(created_at: dt.datetime, now: dt.datetime, max_age_seconds: float | None) -> bool:
    """Whether mail created at `created_at` is older than its template's max age at `now`."""
    if max_age_seconds is None:
        return False
    return created_at + dt.timedelta(seconds=max_age_seconds) <= now


def _more_attempts_refused(cap: int) -> ActionRefused:
    return ActionRefused("more_attempts_range", cap=cap)


def more_attempts_from(text: str | None, cap: int) -> int | None:
    """Read "give it N more attempts" from a form: None when the form has no such field.

    ActionRefused unless N is a whole number from 1 to `cap` (CONSOLE_MAX_ATTEMPTS).
    """
    if text is None:
        return None
    more_attempts = whole_number(text, lowest=1, highest=cap)
    if more_attempts is None:
        raise _more_attempts_refused(cap)
    return more_attempts


def _checked_more_attempts(more_attempts: int, cap: int) -> int:
    if isinstance(more_attempts, bool) or not 1 <= more_attempts <= cap:
        raise _more_attempts_refused(cap)
    return more_attempts


def requeue(
    session: Session,
    intent_id: int,
    *,
    actor: str,
    reason: str,
    expected_status: str | None = None,
    expected_version: str | None = None,
    now: dt.datetime | None = None,
    more_attempts: int | None = None,
    attempt_cap: int | None = None,
    max_age_seconds: float | None = None,
) -> RequeueResult:
    """Make a failed, dead, ambiguous, expired or cancelled intent pending and due now.

    The attempt count is kept (it counts attempts), and so is the ``expires_at``
    the application set: once it has passed, the requeue is refused (the mail is
    no longer wanted; enqueue it again with a new key if it is).

    Without `more_attempts`, an intent that reached the attempt or the age cap
    gets one more attempt. With it (1 to `attempt_cap`, the configured
    CONSOLE_MAX_ATTEMPTS, which the caller passes with it), the worker retries it
    until it made that many more (``attempts_granted``), past both caps; the audit
    entry records it. `max_age_seconds` is the template's max age, if it has one:
    the result says whether the mail is past it and whether its recipient is
    suppressed, either of which keeps the worker from sending it.
    """
    now = now or utcnow()
    reason = required_reason(reason)
    if more_attempts is not None:
        if attempt_cap is None:
            raise ValueError("more_attempts needs the attempt_cap it is checked against")
        more_attempts = _checked_more_attempts(more_attempts, attempt_cap)
    row = load_intent(session, intent_id, expected_status, now, expected_version)
    refuse_unless(row, REQUEUEABLE_STATUSES, "requeue")
    _refuse_unless_still_wanted(row, now)
    values = due_now_values(now, f"requeued by {actor}")
    details = None
    if more_attempts is not None:
        values["attempts_granted"] = row.attempt_count + more_attempts
        more = f"{more_attempts} more attempt{'' if more_attempts == 1 else 's'}"
        values["status_reason"] = f"requeued by {actor} with {more}"  # the stored reason
        details = dict(more_attempts=more_attempts, attempts_granted=values["attempts_granted"])
    result = act(
        session,
        row,
        action="requeue",
        values=values,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
    )
    return RequeueResult(
        **dataclasses.asdict(result),
        recipient_suppressed=is_suppressed(session, row.recipient),
        past_max_age=past_max_age(row.created_at, now, max_age_seconds),
    )


def _refuse_unless_still_wanted(row: Row, now: dt.datetime) -> None:
    """Refuse to requeue mail whose params retention removed, or past its application's expiry."""
    if row.params_scrubbed_at is not None:
        raise ActionRefused("params_removed", intent_id=row.id, scrubbed_at=row.params_scrubbed_at)
    if row.expires_at is not None and row.expires_at <= now:
        raise ActionRefused("past_expiry", intent_id=row.id, expires_at=row.expires_at)


def dead_letter(
    session: Session,
    intent_id: int,
    *,
    actor: str,
    reason: str,
    expected_status: str | None = None,
    expected_version: str | None = None,
    now: dt.datetime | None = None,
) -> ActionResult:
    """Stop a pending intent for good: it becomes dead and is never sent."""
    now = now or utcnow()
    reason = required_reason(reason)
    row = load_intent(session, intent_id, expected_status, now, expected_version)
    refuse_unless(row, (PENDING,), "dead_letter")
    values = dict(status=DEAD, status_reason=f"dead-lettered by {actor}")
    return act(
        session, row, action="dead_letter", values=values, actor=actor, reason=reason, now=now
    )


def record_preview(
    session: Session, intent_id: int, *, actor: str, now: dt.datetime | None = None
) -> None:
    """Audit that `actor` looked at the rendered message of an intent."""
    now = now or utcnow()
    status = session.execute(select(Intent.status).where(Intent.id == intent_id)).scalar()
    if status is None:
        raise ActionRefused("intent_missing", intent_id=intent_id)
    entry = audit_values(
        actor=actor, action="preview", now=now, intent_id=intent_id, before=status, after=status
    )
    write_audit(session, [entry])
