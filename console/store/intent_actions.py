"""Operators' actions on intents: on one, in bulk over a filtered list, and reconciliation.

On one intent: requeue, dead-letter, and the audited look at its message. In bulk: a
preview of the effect over a filtered list, the first intents it would act on, then the
confirmed action. An ambiguous intent is reconciled: marked accepted, resent as it was, or
dead-lettered. Each is the compare-and-set and audit entry of ``console.store.actions``;
none commits.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from console.config import Settings
from console.core.plurals import plural
from console.core.whole_numbers import whole_number
from console.models import AuditEntry, Intent, Suppression, utcnow
from console.store.actions import (
    ActionRefused,
    ActionResult,
    act,
    apply_in_chunks,
    due_now_values,
    load_intent,
    refuse_unless,
    required_reason,
)
from console.store.audit import audit_values, write_audit
from console.store.intent_search import SearchFilters
from console.store.suppressions import is_suppressed
from console.vocabulary import (
    AMBIGUOUS,
    DEAD,
    PENDING,
    REQUEUEABLE_STATUSES,
    SENDING,
    SUBMITTED,
    SUPPRESSED,
)

# One intent --------------------------------------------------------------------------------------
#
# Actions on one intent: requeue, dead-letter, and the audited look at its message.

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


# Bulk actions ------------------------------------------------------------------------------------
#
# Bulk actions over a filtered list: a preview of their effect, then the confirmed action.

BULK_LIMIT = 10_000
BULK_ACTIONS = {"requeue": REQUEUEABLE_STATUSES, "dead_letter": (PENDING,)}
_SKIP_WORDS = {
    SUBMITTED: "already submitted",
    PENDING: "already pending",
    SENDING: "being sent",
    SUPPRESSED: "held back by a suppression",
    DEAD: "already dead",
}


@dataclasses.dataclass(frozen=True)
class BulkPreview:
    """What a bulk action over a filtered list would do, computed before it acts."""

    action: str
    filters: SearchFilters
    matched: int
    eligible: int  # in an allowed status and not skipped
    suppressed_skipped: int
    skipped_by_status: dict[str, int]
    max_id: int
    previewed_at: dt.datetime
    limit: int = BULK_LIMIT
    scrubbed_skipped: int = 0  # params removed by retention: nothing left to render
    expired_skipped: int = 0  # past the expires_at their application set: no longer wanted

    @property
    def will_act(self) -> int:
        return min(self.eligible, self.limit)

    def summary(self) -> str:
        """Say the effect in one line: "requeues 412; 9 suppressed recipients skipped; ..."."""
        verb = {"requeue": "requeues", "dead_letter": "dead-letters"}[self.action]
        parts = [f"{verb} {self.will_act}"]
        if self.eligible > self.limit:
            parts.append(f"{self.eligible - self.limit} more left for another run")
        if self.suppressed_skipped:
            recipients = plural(self.suppressed_skipped, "suppressed recipient")
            parts.append(f"{recipients} skipped")
        if self.scrubbed_skipped:
            parts.append(f"{self.scrubbed_skipped} with params removed by retention skipped")
        if self.expired_skipped:
            parts.append(f"{self.expired_skipped} past their expiry skipped")
        for status, count in sorted(self.skipped_by_status.items()):
            parts.append(f"{count} {_SKIP_WORDS.get(status, status)}")
        return "; ".join(parts)


_SCRUBBED = Intent.params_scrubbed_at.is_not(None)


def _past_expiry(at: dt.datetime) -> Any:
    """Intents whose application-set expiry has passed at `at`: requeue keeps it, so skips them."""
    return Intent.expires_at.is_not(None) & (Intent.expires_at <= at)


def _bulk_conditions(
    session: Session, filters: SearchFilters, action: str, at: dt.datetime
) -> tuple[list[Any], Any]:
    if action not in BULK_ACTIONS:
        raise ActionRefused(f"unknown bulk action {action!r}")
    conditions = filters.conditions(session.get_bind().dialect.name, at)
    suppressed = (
        select(Suppression.id).where(Suppression.recipient == func.lower(Intent.recipient)).exists()
    )
    return conditions, suppressed


def preview_bulk(
    session: Session, filters: SearchFilters, action: str, *, now: dt.datetime | None = None
) -> BulkPreview:
    """Count what `action` would do to the intents `filters` match, changing nothing."""
    now = now or utcnow()
    conditions, suppressed = _bulk_conditions(session, filters, action, now)
    allowed = BULK_ACTIONS[action]
    max_id = session.execute(select(func.coalesce(func.max(Intent.id), 0))).scalar_one()
    by_status = dict(
        session.execute(
            select(Intent.status, func.count())
            .where(*conditions, Intent.id <= max_id)
            .group_by(Intent.status)
        ).all()
    )
    suppressed_skipped = scrubbed_skipped = expired_skipped = 0
    if action == "requeue":
        in_scope = (*conditions, Intent.id <= max_id, Intent.status.in_(allowed))
        suppressed_skipped = session.execute(
            select(func.count()).where(*in_scope, suppressed)
        ).scalar_one()
        scrubbed_skipped = session.execute(
            select(func.count()).where(*in_scope, ~suppressed, _SCRUBBED)
        ).scalar_one()
        expired_skipped = session.execute(
            select(func.count()).where(*in_scope, ~suppressed, ~_SCRUBBED, _past_expiry(now))
        ).scalar_one()
    in_allowed = sum(count for status, count in by_status.items() if status in allowed)
    return BulkPreview(
        action=action,
        filters=filters,
        matched=sum(by_status.values()),
        eligible=in_allowed - suppressed_skipped - scrubbed_skipped - expired_skipped,
        suppressed_skipped=suppressed_skipped,
        scrubbed_skipped=scrubbed_skipped,
        expired_skipped=expired_skipped,
        skipped_by_status={s: c for s, c in by_status.items() if s not in allowed},
        max_id=max_id,
        previewed_at=now,
    )


def apply_bulk(
    session: Session,
    filters: SearchFilters,
    action: str,
    *,
    actor: str,
    reason: str,
    max_id: int,
    previewed_at: dt.datetime,
    now: dt.datetime | None = None,
    limit: int = BULK_LIMIT,
    preview_id: str | None = None,
) -> int:
    """Do what the confirmed preview said, to intents unchanged since; return how many.

    Only intents that existed at the preview (id <= max_id) and were not updated
    after it are touched, so submitting the same confirmation twice acts once.
    `preview_id` (the one-use id of the preview) goes into each audit entry, so
    ``confirmation_of`` finds that the preview was used.
    """
    now = now or utcnow()
    reason = required_reason(reason)
    conditions, suppressed = _bulk_conditions(session, filters, action, previewed_at)
    allowed = BULK_ACTIONS[action]
    query = select(Intent.id, Intent.status, Intent.recipient).where(
        *conditions,
        Intent.id <= max_id,
        Intent.status.in_(allowed),
        (Intent.updated_at.is_(None)) | (Intent.updated_at <= previewed_at),
    )
    if action == "requeue":
        query = query.where(~suppressed, ~_SCRUBBED, ~_past_expiry(now))
    targets: dict[str, list[tuple[int, str]]] = {}
    for row in session.execute(query.order_by(Intent.id).limit(limit)):
        targets.setdefault(row.status, []).append((row.id, row.recipient))
    if action == "requeue":
        values = {status: due_now_values(now, f"requeued by {actor}") for status in targets}
    else:
        values = {PENDING: dict(status=DEAD, status_reason=f"dead-lettered by {actor}")}
    return apply_in_chunks(
        session,
        targets,
        action=action,
        values_by_status=values,
        actor=actor,
        reason=reason,
        now=now,
        not_changed_since=previewed_at,
        details={"bulk": True, "preview": preview_id} if preview_id else {"bulk": True},
    )


# -- the one-use preview: its id rides in the confirmation and in the audit entries ------

PREVIEW_ID_MAX_LENGTH = 64


def new_preview_id() -> str:
    """A fresh id for one bulk preview (the search page puts one in each bulk link)."""
    return secrets.token_urlsafe(12)


def valid_preview_id(value: str) -> bool:
    return 0 < len(value) <= PREVIEW_ID_MAX_LENGTH and all(c.isalnum() or c in "-_" for c in value)


@dataclasses.dataclass(frozen=True)
class BulkConfirmation:
    """A preview that was already confirmed: by whom, when, and how many intents it changed."""

    action: str
    actor: str
    confirmed_at: dt.datetime
    acted: int

    def summary(self) -> str:
        verb = {"requeue": "requeued", "dead_letter": "dead-lettered"}[self.action]
        return (
            f"already confirmed by {self.actor} at {self.confirmed_at:%Y-%m-%d %H:%M:%S} UTC: "
            f"{verb} {plural(self.acted, 'intent')}"
        )


def confirmation_of(
    session: Session, preview_id: str, action: str, *, since: dt.datetime
) -> BulkConfirmation | None:
    """Return how preview `preview_id` was confirmed (audit entries after `since`), if it was."""
    found = session.execute(
        select(AuditEntry.actor, func.min(AuditEntry.created_at), func.count())
        .where(
            AuditEntry.action == action,
            AuditEntry.created_at >= since,
            AuditEntry.details["preview"].as_string() == preview_id,
        )
        .group_by(AuditEntry.actor)
        .order_by(func.min(AuditEntry.created_at))
    ).first()
    if found is None:
        return None
    actor, confirmed_at, acted = found
    return BulkConfirmation(action, actor, confirmed_at, acted)


# Bulk targets ------------------------------------------------------------------------------------
#
# The first intents a bulk action would act on, for its preview to list by name.
#
# The same choice ``apply_bulk`` makes: the search's intents that existed at the preview, in a
# status the action allows, and (to requeue) neither suppressed, emptied by retention nor past
# their application's expiry; in id order.

LISTED = 20


@dataclasses.dataclass(frozen=True)
class BulkTarget:
    id: int
    event: str | None
    idempotency_key: str
    recipient: str
    status: str


def first_targets(
    session: Session,
    filters: SearchFilters,
    action: str,
    *,
    max_id: int,
    at: dt.datetime,
    limit: int = LISTED,
) -> list[BulkTarget]:
    """Return the first `limit` intents (by id) the bulk `action` previewed at `at` acts on."""
    conditions, suppressed = _bulk_conditions(session, filters, action, at)
    columns = [getattr(Intent, field.name) for field in dataclasses.fields(BulkTarget)]
    query = select(*columns).where(
        *conditions, Intent.id <= max_id, Intent.status.in_(BULK_ACTIONS[action])
    )
    if action == "requeue":
        query = query.where(~suppressed, ~_SCRUBBED, ~_past_expiry(at))
    return [BulkTarget(*row) for row in session.execute(query.order_by(Intent.id).limit(limit))]


# Reconciliation ----------------------------------------------------------------------------------
#
# Reconcile an ambiguous intent: mark it accepted, resend it as it was, or dead-letter it.

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
        raise ActionRefused(f"unknown resolution {resolution!r}: use {', '.join(RESOLUTIONS)}")
    reason = required_reason(reason)
    provider_message_id = (provider_message_id or "").strip() or None
    if provider_message_id and len(provider_message_id) > MAX_PROVIDER_ID_LENGTH:
        raise ActionRefused(f"the provider id is longer than {MAX_PROVIDER_ID_LENGTH} characters")
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
