"""Actions on one intent: requeue, dead-letter, and the audited look at its message."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from console.config import Settings
from console.core.plurals import plural
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
from console.store.suppression_lookup import is_suppressed
from console.vocabulary import DEAD, PENDING, REQUEUEABLE_STATUSES

DEFAULT_MAX_ATTEMPTS = Settings.max_attempts  # CONSOLE_MAX_ATTEMPTS unless configured


def suppression_warning(session: Session, recipient: str) -> str | None:
    """Say why requeueing mail to `recipient` will not send it, if it is suppressed."""
    if not is_suppressed(session, recipient):
        return None
    return (
        f"{recipient} is on the suppression list: the worker will hold this mail back "
        "unless the suppression is removed"
    )


def _too_old_warning(row: Row, now: dt.datetime, max_age_seconds: float | None) -> str | None:
    """Say so when the template's max age has passed: the worker will expire it again."""
    if max_age_seconds is None or row.created_at + dt.timedelta(seconds=max_age_seconds) > now:
        return None
    return (
        f"{row.template} mail is useless after {max_age_seconds / 60:.0f} min and this one is "
        "older: the worker will expire it instead of sending it"
    )


def _more_attempts_refused(cap: int) -> ActionRefused:
    return ActionRefused(f"give it a whole number of more attempts, from 1 to {cap}")


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
    attempt_cap: int = DEFAULT_MAX_ATTEMPTS,
    max_age_seconds: float | None = None,
) -> ActionResult:
    """Make a failed, dead, ambiguous, expired or cancelled intent pending and due now.

    The attempt count is kept (it counts attempts), and so is the ``expires_at``
    the application set: once it has passed, the requeue is refused (the mail is
    no longer wanted; enqueue it again with a new key if it is).

    Without `more_attempts`, an intent that reached the attempt or the age cap
    gets one more attempt. With it (1 to `attempt_cap`, the configured
    CONSOLE_MAX_ATTEMPTS), the worker retries it until it made that many more
    (``attempts_granted``), past both caps; the audit entry records it.
    `max_age_seconds` is the template's max age, if it has one: past it, the
    result warns that the worker will expire the mail again.
    """
    now = now or utcnow()
    reason = required_reason(reason)
    if more_attempts is not None:
        more_attempts = _checked_more_attempts(more_attempts, attempt_cap)
    row = load_intent(session, intent_id, expected_status, now, expected_version)
    refuse_unless(row, REQUEUEABLE_STATUSES, "requeue")
    if row.params_scrubbed_at is not None:
        raise ActionRefused(
            f"cannot requeue intent {row.id}: its params were removed by retention "
            f"on {row.params_scrubbed_at:%Y-%m-%d}; enqueue the mail again with a new key"
        )
    if row.expires_at is not None and row.expires_at <= now:
        raise ActionRefused(
            f"cannot requeue intent {row.id}: it expired at {row.expires_at:%Y-%m-%d %H:%M:%S} UTC "
            "(the expiry its application set); enqueue the mail again with a new key if it is "
            "still wanted"
        )
    values = due_now_values(now, f"requeued by {actor}")
    details = None
    if more_attempts is not None:
        values["attempts_granted"] = row.attempt_count + more_attempts
        more = plural(more_attempts, "more attempt")
        values["status_reason"] = f"requeued by {actor} with {more}"
        details = dict(more_attempts=more_attempts, attempts_granted=values["attempts_granted"])
    warnings = (
        suppression_warning(session, row.recipient),
        _too_old_warning(row, now, max_age_seconds),
    )
    warning = "; ".join(text for text in warnings if text) or None
    return act(
        session,
        row,
        action="requeue",
        values=values,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
        warning=warning,
    )


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
    refuse_unless(row, (PENDING,), "dead-letter")
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
        raise ActionRefused(f"intent {intent_id} does not exist")
    entry = audit_values(
        actor=actor, action="preview", now=now, intent_id=intent_id, before=status, after=status
    )
    write_audit(session, [entry])
