"""What every operator action shares: refusals, the compare-and-set, the audit entry.

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

from sqlalchemy import Row, select, update
from sqlalchemy.orm import Session

from console.models import Intent
from console.store.audit import audit_values, write_audit
from console.vocabulary import PENDING, SENDING

MAX_REASON_LENGTH = 2000
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


def required_reason(reason: str | None) -> str:
    """Return the operator's reason, stripped; ActionRefused when missing or too long."""
    reason = (reason or "").strip()
    if not reason:
        raise ActionRefused("a reason is required")
    if len(reason) > MAX_REASON_LENGTH:
        raise ActionRefused(f"the reason is longer than {MAX_REASON_LENGTH} characters")
    return reason


def load_intent(
    session: Session, intent_id: int, expected_status: str | None, now: dt.datetime
) -> Row:
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
            Intent.params_scrubbed_at,
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


def refuse_unless(row: Row, allowed: Iterable[str], verb: str) -> None:
    """Refuse to `verb` an intent whose status is not one of `allowed`."""
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


def act(
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
    """Change one intent read in `row` by compare-and-set, and audit the change."""
    _compare_and_set(session, row, {**values, "updated_at": now})
    after = values["status"]
    write_audit(
        session,
        [
            audit_values(
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


def due_now_values(now: dt.datetime, status_reason: str) -> dict[str, Any]:
    """Values that make an intent pending and due at once, with no lease held."""
    return dict(
        status=PENDING,
        next_attempt_at=now,
        lease_token=None,
        lease_expires_at=None,
        status_reason=status_reason,
    )


def apply_in_chunks(
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
                audit_values(
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
            write_audit(session, rows)
            acted += len(rows)
    return acted
