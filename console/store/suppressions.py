"""The suppression list: whether an address is on it, and adding and removing addresses.

An erasure (``console forget``) keeps a suppressed address only as its keyed hash
(``console.core.address_hash``), so every check compares both forms. The key is this process's
secret key, set once at start-up with ``use_address_key`` (the console does so in
``console.outbox.configure``). Without a key only the address itself is compared: an application
that enqueues without CONSOLE_SECRET_KEY leaves the hashed form to the worker's checks before
each send. Adding and removing an address by hand is audited, and so is releasing what a removed
suppression held back. The relay's refusals and the provider's events add addresses too.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from typing import Any

from sqlalchemy import Connection, delete, func, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash
from console.models import Intent, Suppression, utcnow
from console.store.actions import (
    ActionRefused,
    StaleAction,
    apply_in_chunks,
    due_now_values,
    required_reason,
)
from console.store.audit import audit_values, write_audit
from console.store.sql_helpers import (
    PAGE_SIZE,
    dialect_of,
    insert_for,
    insert_on_conflict,
    prefix_match,
)
from console.vocabulary import SUPPRESSED

_address_key = ""


def use_address_key(secret_key: str | None) -> None:
    """Compare suppressions with keyed hashes under `secret_key` from now on ('' or None: not)."""
    global _address_key
    _address_key = secret_key or ""


def recipient_forms(recipient: str) -> list[str]:
    """The forms of `recipient` the suppression list may hold: lower-cased, then its hash."""
    lowered = recipient.lower()
    if not _address_key:
        return [lowered]
    return [lowered, _hash_of(_address_key, lowered)]


@functools.lru_cache(maxsize=4096)  # the claim and the mark before the body ask for the same
def _hash_of(key: str, lowered: str) -> str:
    return address_hash(key, lowered)


def is_suppressed(session: Session, recipient: str) -> bool:
    """Return whether `recipient` is on the suppression list."""
    forms = recipient_forms(recipient)
    query = select(Suppression.id).where(Suppression.recipient.in_(forms)).limit(1)
    return session.execute(query).first() is not None


def is_suppressed_now(connection: Connection, recipient: str) -> bool:
    """Return whether `recipient` is on the list as of now: one indexed lookup.

    Ends its read at once, so a suppression committed later is seen by the next call
    (on SQLite an open read would keep seeing the old snapshot).
    """
    forms = recipient_forms(recipient)
    query = select(Suppression.id).where(Suppression.recipient.in_(forms)).limit(1)
    found = connection.execute(query).first() is not None
    connection.commit()
    return found


def normalized_address(raw: str) -> str:
    """Return the lower-cased address the suppression list stores; ActionRefused if invalid."""
    from email_validator import EmailNotValidError, validate_email  # imported when needed

    try:
        return validate_email(raw.strip(), check_deliverability=False).normalized.lower()
    except EmailNotValidError as exc:
        raise ActionRefused("address_invalid", address=raw, problem=str(exc)) from None


def _insert_ignoring_duplicate(session: Session, values: dict[str, Any]) -> int | None:
    statement = (
        insert_for(dialect_of(session))(Suppression)
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
    reason = required_reason(reason)
    recipient = normalized_address(address)
    values = dict(recipient=recipient, reason="manual", note=reason, created_by=actor)
    held = is_suppressed(session, recipient)  # also as the keyed hash an erasure left
    suppression_id = (
        None if held else _insert_ignoring_duplicate(session, {**values, "created_at": now})
    )
    if suppression_id is None:
        raise StaleAction("already_suppressed", recipient=recipient)
    entry = audit_values(
        actor=actor, action="suppression_add", now=now, reason=reason, target=recipient
    )
    write_audit(session, [entry])
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
    reason = required_reason(reason)
    removed = session.execute(
        delete(Suppression)
        .where(Suppression.id == suppression_id)
        .returning(Suppression.recipient, Suppression.reason, Suppression.note)
        .execution_options(synchronize_session=False)
    ).one_or_none()
    if removed is None:
        raise StaleAction("suppression_gone")
    details = {"suppressed_for": removed.reason, "note": removed.note}
    entry = audit_values(
        actor=actor,
        action="suppression_remove",
        now=now,
        reason=reason,
        target=removed.recipient,
        details={k: v for k, v in details.items() if v},
    )
    write_audit(session, [entry])
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
    reason = required_reason(reason)
    recipient = normalized_address(address)
    if is_suppressed(session, recipient):
        raise ActionRefused("still_suppressed", recipient=recipient)
    held = session.execute(
        select(Intent.id, Intent.recipient).where(
            Intent.status == SUPPRESSED, func.lower(Intent.recipient) == recipient
        )
    ).all()
    values = due_now_values(now, f"released by {actor} after the suppression was removed")
    return apply_in_chunks(
        session,
        {SUPPRESSED: [(row.id, row.recipient) for row in held]},
        action="requeue",
        values_by_status={SUPPRESSED: values},
        actor=actor,
        reason=reason,
        now=now,
    )


@dataclasses.dataclass(frozen=True)
class SuppressionPage:
    entries: list[Suppression]
    next_before: int | None


def suppression_page(
    session: Session, *, q: str = "", before: int | None = None, limit: int = PAGE_SIZE
) -> SuppressionPage:
    """Return suppressions newest first, optionally those whose address starts with `q`."""
    query = select(Suppression).order_by(Suppression.id.desc()).limit(limit + 1)
    if q:
        query = query.where(prefix_match(Suppression.recipient, q.lower(), dialect_of(session)))
    if before is not None:
        query = query.where(Suppression.id < before)
    entries = list(session.execute(query).scalars())
    next_before = entries[limit - 1].id if len(entries) > limit else None
    return SuppressionPage(entries[:limit], next_before)


def held_back_count(session: Session, recipient: str) -> int:
    """Count the intents for `recipient` that the suppression held back."""
    query = select(func.count()).where(
        Intent.status == "suppressed", func.lower(Intent.recipient) == recipient.lower()
    )
    return session.execute(query).scalar_one()


REFUSED_MAILBOX_ACTOR = "smtp"  # created_by of suppressions a relay's refusal made
REFUSAL_NOTE_LIMIT = 500


_SUPPRESS_REFUSED = insert_on_conflict(
    Suppression.__table__,
    ["recipient", "reason", "note", "source_attempt_id", "created_by", "created_at"],
    "recipient",
    returning="id",
)


def suppress_refused_mailbox(
    connection: Connection, *, recipient: str, reply: str, attempt_id: int, now: dt.datetime
) -> bool:
    """Suppress a recipient the relay refused as unknown or disabled, naming the attempt.

    The caller commits. False when already suppressed.
    """
    values = refused_mailbox_values(recipient, reply, attempt_id, now)
    return connection.execute(_SUPPRESS_REFUSED, values).first() is not None


def refused_mailbox_values(
    recipient: str, reply: str, attempt_id: int, now: dt.datetime
) -> dict[str, Any]:
    """The suppression row of a mailbox the relay refused in `reply` to `attempt_id`."""
    return dict(
        recipient=recipient.lower()[:320],
        reason="bounce",
        note=reply[:REFUSAL_NOTE_LIMIT],
        source_attempt_id=attempt_id,
        created_by=REFUSED_MAILBOX_ACTOR,
        created_at=now,
    )


def suppress_for_event(
    session: Session,
    *,
    recipient: str,
    reason: str,
    note: str | None,
    event_id: int,
    actor: str,
    now: dt.datetime,
) -> None:
    """Upsert `recipient`'s suppression naming provider event `event_id`.

    A complaint outranks an earlier bounce. Never commits.
    """
    session.execute(
        insert_for(dialect_of(session))(Suppression)
        .values(
            recipient=recipient,
            reason=reason,
            note=note,
            source_event_id=event_id,
            created_by=actor,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=["recipient"])
    )
    if reason == "complaint":
        session.execute(
            update(Suppression)
            .where(Suppression.recipient == recipient, Suppression.reason == "bounce")
            .values(reason="complaint", source_event_id=event_id, note=note)
        )
