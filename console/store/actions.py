"""What every operator action shares: refusals, the compare-and-set, the audit entry.

An intent's **version** is what the operator saw of it: its status, attempt
count and ``updated_at`` (every write of the send loop and of an operator sets
them), and the columns the other writers change without touching
``updated_at`` (provider facts and id, the retention scrub, a domain deferral's
next attempt). The page carries it as one opaque token (``version_of``); an
action given that token refuses (StaleAction, 409) when the intent moved since,
its reason naming what changed. The UPDATE itself is a compare-and-set on every
column of the version as read just before it, so a double click, a second tab or
a concurrent worker makes the later write change nothing. The functions never
commit; the caller does. A refusal carries a reason and facts, not a sentence:
``console/words/refusals.py`` words it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Row, String, and_, cast, select, update
from sqlalchemy.orm import Session

from console.models import Intent
from console.store.audit import audit_values, write_audit
from console.vocabulary import PENDING, SENDING
from console.words.refusals import Refusal

MAX_REASON_LENGTH = 2000
_CHUNK = 500


class ActionRefused(Refusal, ValueError):
    """The action cannot be done as asked: `reason` and its facts say why. Nothing changed."""


class StaleAction(ActionRefused):
    """The intent changed since the operator saw it: a double submit, a colleague, the worker."""


@dataclasses.dataclass(frozen=True)
class ActionResult:
    intent_id: int
    action: str
    before_status: str
    after_status: str

    @property
    def wakes_worker(self) -> bool:
        """Whether the intent became due and the worker should look now."""
        return self.after_status == PENDING


def required_reason(reason: str | None) -> str:
    """Return the operator's reason, stripped; ActionRefused when missing or too long."""
    reason = (reason or "").strip()
    if not reason:
        raise ActionRefused("reason_missing")
    if len(reason) > MAX_REASON_LENGTH:
        raise ActionRefused("reason_too_long", limit=MAX_REASON_LENGTH)
    return reason


# What an intent's version is made of. Status, attempts and updated_at move on
# every write of the send loop and of operators; the rest are written without
# updated_at (events.py, retention.py, send_guards.py).
VERSION_COLUMNS = (
    Intent.status,
    Intent.attempt_count,
    Intent.updated_at,
    Intent.next_attempt_at,
    Intent.provider_message_id,
    Intent.delivered_at,
    Intent.bounced_at,
    Intent.bounce_type,
    Intent.complained_at,
    Intent.params_scrubbed_at,
)
_VERSION_NAMES = tuple(column.key for column in VERSION_COLUMNS)
_AS_STORED = "stored_"  # label prefix of a version column read back as the text it is stored as


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def version_of(intent: Any) -> str:
    """Return the opaque token of what `intent` (a row or an Intent) is now, for a form."""
    values = [_plain(getattr(intent, name)) for name in _VERSION_NAMES]
    packed = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(packed).decode().rstrip("=")


def _seen(intent_id: int, token: str) -> dict[str, Any]:
    try:
        values = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        values = None
    if not isinstance(values, list) or len(values) != len(_VERSION_NAMES):
        raise ActionRefused("version_unreadable", intent_id=intent_id)
    return dict(zip(_VERSION_NAMES, values, strict=True))


def _what_changed(row: Row, seen: dict[str, Any]) -> StaleAction | None:
    """The refusal naming how `row` differs from the version the operator saw; None if it
    does not."""
    now = {name: _plain(getattr(row, name)) for name in _VERSION_NAMES}
    if now == seen:
        return None
    if now["attempt_count"] != seen["attempt_count"]:
        return StaleAction(
            "retried", intent_id=row.id, status=row.status, attempt_count=row.attempt_count
        )
    if now["status"] != seen["status"]:
        return StaleAction(
            "status_changed",
            intent_id=row.id,
            status=row.status,
            status_reason=row.status_reason,
            was=seen["status"],
        )
    if now["bounced_at"] != seen["bounced_at"] or now["bounce_type"] != seen["bounce_type"]:
        return StaleAction("bounce_recorded", intent_id=row.id, bounce_type=row.bounce_type)
    if now["complained_at"] != seen["complained_at"]:
        return StaleAction("complaint_recorded", intent_id=row.id)
    if now["delivered_at"] != seen["delivered_at"]:
        return StaleAction("delivery_recorded", intent_id=row.id)
    if now["provider_message_id"] != seen["provider_message_id"]:
        return StaleAction(
            "provider_id_recorded", intent_id=row.id, provider_message_id=row.provider_message_id
        )
    if now["params_scrubbed_at"] != seen["params_scrubbed_at"]:
        return StaleAction("params_scrubbed", intent_id=row.id)
    if now["next_attempt_at"] != seen["next_attempt_at"]:
        return StaleAction(
            "next_attempt_moved", intent_id=row.id, next_attempt_at=row.next_attempt_at
        )
    return StaleAction("changed_otherwise", intent_id=row.id, status=row.status)


def _read_intent(session: Session, intent_id: int) -> Row | None:
    stored = (cast(column, String).label(_AS_STORED + column.key) for column in VERSION_COLUMNS)
    return session.execute(
        select(
            Intent.id,
            *VERSION_COLUMNS,
            Intent.status_reason,
            Intent.recipient,
            Intent.lease_expires_at,
            Intent.expires_at,
            Intent.template,
            Intent.created_at,
            *stored,
        ).where(Intent.id == intent_id)
    ).one_or_none()


def load_intent(
    session: Session,
    intent_id: int,
    expected_status: str | None,
    now: dt.datetime,
    expected_version: str | None = None,
) -> Row:
    """Read the intent's current state; refuse when it is gone, changed or leased.

    `expected_version` is the token the operator's page carried (``version_of``):
    any change since answers StaleAction, saying what changed.
    """
    row = _read_intent(session, intent_id)
    if row is None:
        raise ActionRefused("intent_missing", intent_id=intent_id)
    if expected_version is not None:
        stale = _what_changed(row, _seen(intent_id, expected_version))
        if stale is not None:
            raise stale
    if expected_status is not None and row.status != expected_status:
        raise StaleAction(
            "status_moved", intent_id=intent_id, status=row.status, expected=expected_status
        )
    if row.status == SENDING and row.lease_expires_at and row.lease_expires_at > now:
        raise ActionRefused("lease_held", intent_id=intent_id, until=row.lease_expires_at)
    return row


def refuse_unless(row: Row, allowed: Iterable[str], action: str) -> None:
    """Refuse `action` (its audit name) on an intent whose status is not one of `allowed`."""
    allowed = tuple(allowed)
    if row.status not in allowed:
        raise ActionRefused(
            "wrong_status", action=action, intent_id=row.id, status=row.status, allowed=allowed
        )


def _compare_and_set(session: Session, row: Row, values: dict[str, Any]) -> None:
    """Apply `values` only while every column of the intent's version reads as in `row`.

    The columns are compared as the text they are stored as, read in `row`, so
    no round trip through Python types can make an unchanged row look changed.
    """
    unchanged = and_(
        *(
            cast(column, String).is_not_distinct_from(getattr(row, _AS_STORED + column.key))
            for column in VERSION_COLUMNS
        )
    )
    statement = (
        update(Intent)
        .where(Intent.id == row.id, unchanged)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if session.execute(statement).rowcount != 1:
        current = _read_intent(session, row.id)
        if current is None:
            raise StaleAction("intent_removed", intent_id=row.id)
        seen = {name: _plain(getattr(row, name)) for name in _VERSION_NAMES}
        raise _what_changed(current, seen) or StaleAction("changed_meanwhile", intent_id=row.id)


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
    return ActionResult(row.id, action, row.status, after)


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
