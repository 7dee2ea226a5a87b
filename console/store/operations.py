"""Operator actions, each audited and acting at most once.

Every change is a compare-and-set on the status the operator saw: the UPDATE
only matches while the intent is still in that status, so a double click, a
second tab or a concurrent worker makes the later attempt change nothing (it
raises StaleAction). The functions never commit; the caller does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable
from typing import Any

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import Row, delete, func, insert, select, update
from sqlalchemy.orm import Session

from console.models import (
    AMBIGUOUS,
    DEAD,
    EXPIRED,
    PENDING,
    REQUEUEABLE_STATUSES,
    SENDING,
    SUBMITTED,
    SUPPRESSED,
    AuditEntry,
    Intent,
    OperatorUser,
    Suppression,
    utcnow,
)
from console.outbox import is_suppressed
from console.render import TemplateError, default_catalog
from console.store.queries import SearchFilters
from console.users import create_user

MAX_REASON_LENGTH = 2000
MAX_PROVIDER_ID_LENGTH = 255
BULK_LIMIT = 10_000
_CHUNK = 500


class ActionRefused(ValueError):
    """The action cannot be done as asked; the message says why. Nothing changed."""


class StaleAction(ActionRefused):
    """The intent changed since the operator saw it: a double submit, a colleague, the worker."""


@dataclasses.dataclass(frozen=True)
class ActionResult:
    intent_id: int
    action: str
    before_status: str
    after_status: str
    warning: str | None = None

    @property
    def wakes_worker(self) -> bool:
        """Whether the intent became due and the worker should look now."""
        return self.after_status == PENDING


def _required_reason(reason: str | None) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ActionRefused("a reason is required")
    if len(reason) > MAX_REASON_LENGTH:
        raise ActionRefused(f"the reason is longer than {MAX_REASON_LENGTH} characters")
    return reason


def _audit_values(
    *,
    actor: str,
    action: str,
    now: dt.datetime,
    reason: str | None = None,
    intent_id: int | None = None,
    target: str | None = None,
    before: str | None = None,
    after: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return dict(
        actor=actor,
        action=action,
        intent_id=intent_id,
        target=target,
        reason=reason,
        before_status=before,
        after_status=after,
        details=details or None,
        created_at=now,
    )


def _write_audit(session: Session, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(insert(AuditEntry), rows)


def _load(session: Session, intent_id: int, expected_status: str | None, now: dt.datetime) -> Row:
    """Read the intent's current state; refuse when it is gone, changed or leased."""
    row = session.execute(
        select(
            Intent.id,
            Intent.status,
            Intent.recipient,
            Intent.lease_expires_at,
            Intent.expires_at,
            Intent.provider_message_id,
            Intent.template,
            Intent.created_at,
        ).where(Intent.id == intent_id)
    ).one_or_none()
    if row is None:
        raise ActionRefused(f"intent {intent_id} does not exist")
    if expected_status is not None and row.status != expected_status:
        raise StaleAction(
            f"intent {intent_id} is now {row.status}, no longer {expected_status}: nothing was done"
        )
    if row.status == SENDING and row.lease_expires_at and row.lease_expires_at > now:
        raise ActionRefused(
            f"a worker holds a live lease on intent {intent_id} until "
            f"{row.lease_expires_at:%H:%M:%S} UTC; wait for its outcome"
        )
    return row


def _refuse_unless(row: Row, allowed: Iterable[str], verb: str) -> None:
    allowed = tuple(allowed)
    if row.status not in allowed:
        raise ActionRefused(
            f"cannot {verb} intent {row.id}: it is {row.status} "
            f"(only possible from {', '.join(allowed)})"
        )


def _compare_and_set(session: Session, row: Row, values: dict[str, Any]) -> None:
    """Apply `values` only while the intent still has the status read in `row`."""
    statement = (
        update(Intent)
        .where(Intent.id == row.id, Intent.status == row.status)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if session.execute(statement).rowcount != 1:
        raise StaleAction(f"intent {row.id} changed meanwhile: nothing was done")


def _act(
    session: Session,
    row: Row,
    *,
    action: str,
    values: dict[str, Any],
    actor: str,
    reason: str,
    now: dt.datetime,
    details: dict[str, Any] | None = None,
    warning: str | None = None,
) -> ActionResult:
    _compare_and_set(session, row, {**values, "updated_at": now})
    after = values["status"]
    _write_audit(
        session,
        [
            _audit_values(
                actor=actor,
                action=action,
                now=now,
                reason=reason,
                intent_id=row.id,
                target=row.recipient,
                before=row.status,
                after=after,
                details=details,
            )
        ],
    )
    return ActionResult(row.id, action, row.status, after, warning)


def _due_now(now: dt.datetime, status_reason: str) -> dict[str, Any]:
    """Values that make an intent pending and due at once, with no lease held."""
    return dict(
        status=PENDING,
        next_attempt_at=now,
        lease_token=None,
        lease_expires_at=None,
        status_reason=status_reason,
    )


def suppression_warning(session: Session, recipient: str) -> str | None:
    """Say why requeueing mail to `recipient` will not send it, if it is suppressed."""
    if not is_suppressed(session, recipient):
        return None
    return (
        f"{recipient} is on the suppression list: the worker will hold this mail back "
        "unless the suppression is removed"
    )


def _too_old_warning(row: Row, now: dt.datetime) -> str | None:
    """Say so when the template's max age has passed: the worker will expire it again."""
    try:
        max_age_seconds = default_catalog().settings(row.template).max_age_seconds
    except TemplateError:
        return None
    if max_age_seconds is None or row.created_at + dt.timedelta(seconds=max_age_seconds) > now:
        return None
    return (
        f"{row.template} mail is useless after {max_age_seconds / 60:.0f} min and this one is "
        "older: the worker will expire it instead of sending it"
    )


def requeue(
    session: Session,
    intent_id: int,
    *,
    actor: str,
    reason: str,
    expected_status: str | None = None,
    now: dt.datetime | None = None,
) -> ActionResult:
    """Make a failed, dead, ambiguous, expired or cancelled intent pending and due now.

    The attempt count is kept (it counts attempts). An expired intent loses its
    expiry, or the worker would expire it again at once.
    """
    now = now or utcnow()
    reason = _required_reason(reason)
    row = _load(session, intent_id, expected_status, now)
    _refuse_unless(row, REQUEUEABLE_STATUSES, "requeue")
    values = _due_now(now, f"requeued by {actor}")
    details = {}
    if row.expires_at is not None:
        values["expires_at"] = None
        details["expiry_removed"] = row.expires_at.isoformat()
    warnings = (suppression_warning(session, row.recipient), _too_old_warning(row, now))
    warning = "; ".join(text for text in warnings if text) or None
    return _act(
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
    now: dt.datetime | None = None,
) -> ActionResult:
    """Stop a pending intent for good: it becomes dead and is never sent."""
    now = now or utcnow()
    reason = _required_reason(reason)
    row = _load(session, intent_id, expected_status, now)
    _refuse_unless(row, (PENDING,), "dead-letter")
    values = dict(status=DEAD, status_reason=f"dead-lettered by {actor}")
    return _act(
        session, row, action="dead_letter", values=values, actor=actor, reason=reason, now=now
    )


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
    now: dt.datetime | None = None,
) -> ActionResult:
    """Resolve an ambiguous intent: mark it accepted, resend it as it was, or dead-letter it."""
    now = now or utcnow()
    if resolution not in RESOLUTIONS:
        raise ActionRefused(f"unknown resolution {resolution!r}: use {', '.join(RESOLUTIONS)}")
    reason = _required_reason(reason)
    provider_message_id = (provider_message_id or "").strip() or None
    if provider_message_id and len(provider_message_id) > MAX_PROVIDER_ID_LENGTH:
        raise ActionRefused(f"the provider id is longer than {MAX_PROVIDER_ID_LENGTH} characters")
    row = _load(session, intent_id, expected_status, now)
    _refuse_unless(row, (AMBIGUOUS,), "reconcile")
    details: dict[str, Any] = {"resolution": resolution}
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
            details["provider_message_id"] = provider_message_id
    elif resolution == "resend":
        values = _due_now(now, f"resend ordered by {actor}")
    else:
        values = dict(status=DEAD, status_reason=f"dead-lettered by {actor}")
    return _act(
        session,
        row,
        action=f"reconcile_{resolution}",
        values=values,
        actor=actor,
        reason=reason,
        now=now,
        details=details,
    )


def record_preview(
    session: Session, intent_id: int, *, actor: str, now: dt.datetime | None = None
) -> None:
    """Audit that `actor` looked at the rendered message of an intent."""
    now = now or utcnow()
    status = session.execute(select(Intent.status).where(Intent.id == intent_id)).scalar()
    if status is None:
        raise ActionRefused(f"intent {intent_id} does not exist")
    entry = _audit_values(
        actor=actor, action="preview", now=now, intent_id=intent_id, before=status, after=status
    )
    _write_audit(session, [entry])


# ---- suppressions -------------------------------------------------------------------


def normalized_address(raw: str) -> str:
    """Return the lower-cased address the suppression list stores; ActionRefused if invalid."""
    try:
        return validate_email(raw.strip(), check_deliverability=False).normalized.lower()
    except EmailNotValidError as exc:
        raise ActionRefused(f"invalid address {raw!r}: {exc}") from None


def _insert_ignoring_duplicate(session: Session, values: dict[str, Any]) -> int | None:
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    statement = (
        dialect_insert(Suppression)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["recipient"])
        .returning(Suppression.id)
    )
    return session.execute(statement).scalar_one_or_none()


def add_suppression(
    session: Session,
    address: str,
    *,
    actor: str,
    reason: str,
    now: dt.datetime | None = None,
) -> int:
    """Put `address` on the suppression list by hand; return the suppression's id."""
    now = now or utcnow()
    reason = _required_reason(reason)
    recipient = normalized_address(address)
    values = dict(recipient=recipient, reason="manual", note=reason, created_by=actor)
    suppression_id = _insert_ignoring_duplicate(session, {**values, "created_at": now})
    if suppression_id is None:
        raise StaleAction(f"{recipient} is already on the suppression list: nothing was done")
    entry = _audit_values(
        actor=actor, action="suppression_add", now=now, reason=reason, target=recipient
    )
    _write_audit(session, [entry])
    return suppression_id


def remove_suppression(
    session: Session,
    suppression_id: int,
    *,
    actor: str,
    reason: str,
    now: dt.datetime | None = None,
) -> str:
    """Take an address off the suppression list; return the address."""
    now = now or utcnow()
    reason = _required_reason(reason)
    removed = session.execute(
        delete(Suppression)
        .where(Suppression.id == suppression_id)
        .returning(Suppression.recipient, Suppression.reason, Suppression.note)
        .execution_options(synchronize_session=False)
    ).one_or_none()
    if removed is None:
        raise StaleAction("that suppression was already removed: nothing was done")
    details = {"suppressed_for": removed.reason, "note": removed.note}
    entry = _audit_values(
        actor=actor,
        action="suppression_remove",
        now=now,
        reason=reason,
        target=removed.recipient,
        details={k: v for k, v in details.items() if v},
    )
    _write_audit(session, [entry])
    return removed.recipient


def release_held_back(
    session: Session,
    address: str,
    *,
    actor: str,
    reason: str,
    now: dt.datetime | None = None,
) -> int:
    """Requeue the intents a removed suppression held back; return how many."""
    now = now or utcnow()
    reason = _required_reason(reason)
    recipient = normalized_address(address)
    if is_suppressed(session, recipient):
        raise ActionRefused(f"{recipient} is still suppressed: remove the suppression first")
    held = session.execute(
        select(Intent.id, Intent.recipient).where(
            Intent.status == SUPPRESSED, func.lower(Intent.recipient) == recipient
        )
    ).all()
    values = _due_now(now, f"released by {actor} after the suppression was removed")
    return _apply_in_chunks(
        session,
        {SUPPRESSED: [(row.id, row.recipient) for row in held]},
        action="requeue",
        values_by_status={SUPPRESSED: values},
        actor=actor,
        reason=reason,
        now=now,
    )


def _apply_in_chunks(
    session: Session,
    targets: dict[str, list[tuple[int, str]]],
    *,
    action: str,
    values_by_status: dict[str, dict[str, Any]],
    actor: str,
    reason: str,
    now: dt.datetime,
    not_changed_since: dt.datetime | None = None,
    details: dict[str, Any] | None = None,
) -> int:
    """Compare-and-set many intents, grouped by the status they were read in; audit each."""
    acted = 0
    for status, id_and_recipient in targets.items():
        recipients = dict(id_and_recipient)
        ids = list(recipients)
        values = {**values_by_status[status], "updated_at": now}
        for start in range(0, len(ids), _CHUNK):
            statement = update(Intent).where(
                Intent.id.in_(ids[start : start + _CHUNK]), Intent.status == status
            )
            if not_changed_since is not None:
                statement = statement.where(
                    (Intent.updated_at.is_(None)) | (Intent.updated_at <= not_changed_since)
                )
            changed = session.execute(
                statement.values(**values)
                .returning(Intent.id)
                .execution_options(synchronize_session=False)
            ).scalars()
            rows = [
                _audit_values(
                    actor=actor,
                    action=action,
                    now=now,
                    reason=reason,
                    intent_id=intent_id,
                    target=recipients[intent_id],
                    before=status,
                    after=values["status"],
                    details=details,
                )
                for intent_id in changed
            ]
            _write_audit(session, rows)
            acted += len(rows)
    return acted


# ---- bulk actions -------------------------------------------------------------------

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
            parts.append(f"{self.suppressed_skipped} suppressed recipients skipped")
        for status, count in sorted(self.skipped_by_status.items()):
            parts.append(f"{count} {_SKIP_WORDS.get(status, status)}")
        return "; ".join(parts)


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
    suppressed_skipped = 0
    if action == "requeue":
        suppressed_skipped = session.execute(
            select(func.count()).where(
                *conditions, Intent.id <= max_id, Intent.status.in_(allowed), suppressed
            )
        ).scalar_one()
    in_allowed = sum(count for status, count in by_status.items() if status in allowed)
    return BulkPreview(
        action=action,
        filters=filters,
        matched=sum(by_status.values()),
        eligible=in_allowed - suppressed_skipped,
        suppressed_skipped=suppressed_skipped,
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
) -> int:
    """Do what the confirmed preview said, to intents unchanged since; return how many.

    Only intents that existed at the preview (id <= max_id) and were not updated
    after it are touched, so submitting the same confirmation twice acts once.
    """
    now = now or utcnow()
    reason = _required_reason(reason)
    conditions, suppressed = _bulk_conditions(session, filters, action, previewed_at)
    allowed = BULK_ACTIONS[action]
    query = select(Intent.id, Intent.status, Intent.recipient).where(
        *conditions,
        Intent.id <= max_id,
        Intent.status.in_(allowed),
        (Intent.updated_at.is_(None)) | (Intent.updated_at <= previewed_at),
    )
    if action == "requeue":
        query = query.where(~suppressed)
    targets: dict[str, list[tuple[int, str]]] = {}
    for row in session.execute(query.order_by(Intent.id).limit(limit)):
        targets.setdefault(row.status, []).append((row.id, row.recipient))
    if action == "requeue":
        values = {status: _due_now(now, f"requeued by {actor}") for status in targets}
        if EXPIRED in values:
            values[EXPIRED]["expires_at"] = None
    else:
        values = {PENDING: dict(status=DEAD, status_reason=f"dead-lettered by {actor}")}
    return _apply_in_chunks(
        session,
        targets,
        action=action,
        values_by_status=values,
        actor=actor,
        reason=reason,
        now=now,
        not_changed_since=previewed_at,
        details={"bulk": True},
    )


# ---- users --------------------------------------------------------------------------


def add_user(
    session: Session,
    username: str,
    password: str,
    role: str,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Create an account (console.users rules) and audit it; UserError on bad input."""
    now = now or utcnow()
    user = create_user(session, username, password, role)
    entry = _audit_values(
        actor=actor, action="user_create", now=now, target=user.username, details={"role": role}
    )
    _write_audit(session, [entry])
    return user


def set_user_active(
    session: Session,
    user_id: int,
    active: bool,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Deactivate (or reactivate) an account; never the actor's own, never the last admin."""
    now = now or utcnow()
    user = session.get(OperatorUser, user_id)
    if user is None:
        raise ActionRefused(f"user {user_id} does not exist")
    if user.username == actor and not active:
        raise ActionRefused("you cannot deactivate your own account")
    if bool(user.active) == active:
        state = "active" if active else "deactivated"
        raise StaleAction(f"{user.username} is already {state}: nothing was done")
    if not active and user.role == "admin" and _active_admins(session) <= 1:
        raise ActionRefused("the last active admin cannot be deactivated")
    changed = session.execute(
        update(OperatorUser)
        .where(OperatorUser.id == user_id, OperatorUser.active == (not active))
        .values(active=active)
        .execution_options(synchronize_session=False)
    ).rowcount
    if changed != 1:
        raise StaleAction(f"{user.username} changed meanwhile: nothing was done")
    session.refresh(user)
    action = "user_activate" if active else "user_deactivate"
    _write_audit(
        session, [_audit_values(actor=actor, action=action, now=now, target=user.username)]
    )
    return user


def _active_admins(session: Session) -> int:
    query = select(func.count()).where(OperatorUser.role == "admin", OperatorUser.active)
    return session.execute(query).scalar_one()
