"""An erasure request: every row about one address deleted, or its address replaced by a hash.

``preview`` says what ``forget`` would do; ``forget`` does it in the caller's transaction (never
commits), so the erasure happens entirely or not at all:

- every finished intent to the address goes, with its attempts and provider events; an unfinished
  one (pending, sending, ambiguous) refuses the erasure, naming it, unless ``cancel`` cancels it
  first;
- provider events naming the address (recipient, diagnostic, payload) go;
- finished intents to other people whose params quote the address lose their params;
- audit entries, suppression notes and hold reasons name it by its keyed hash;
- failed-login counts of a username naming it go;
- a suppression of the address stays as the keyed hash only;
- the erasure is audited: who, when, the reason, the hash — never the address.

"Naming" and "quoting" find the address in any letter case, plain, URL-encoded or JSON-escaped
(``console.store.retention``). On SQLite the deleted bytes are zeroed and, once the caller
commits, the WAL is emptied (``console.store.erased_bytes``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import delete, func, null, or_, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import address_hash
from console.models import AuditEntry, Intent, ProviderEvent, Suppression, utcnow
from console.store.actions import ActionRefused, StaleAction, required_reason
from console.store.address_redaction import (
    audit_naming,
    mentions,
    redact_audit_entries,
    redact_hold_reasons,
    redact_suppression_notes,
    replace_forms,
)
from console.store.audit import audit_values, write_audit
from console.store.erased_bytes import wipe_when_committed
from console.store.login_failures import forget_login_failures
from console.store.retention import delete_finished_intents
from console.store.suppressions import normalized_address
from console.vocabulary import CANCELLED, TERMINAL_STATUSES

ERASE_ACTION = "forget"
CANCELLED_REASON = "cancelled for an erasure request"
LISTED = 20  # unfinished intents named in a refusal


@dataclasses.dataclass(frozen=True)
class ErasurePreview:
    """What an erasure of one address would remove, counted before anything changes."""

    address: str  # lower-cased, as the suppression list stores it
    token: str  # addr:<12 hex>
    finished_intents: int
    unfinished: list[tuple[int, str]]  # (intent id, status): refuse unless cancelled
    events: int  # provider events that go (those of the intents, those naming it)
    audit_entries: int  # entries whose address becomes the hash
    suppressed: bool
    params_elsewhere: int  # finished intents to others whose params quote it: scrubbed
    unsent_elsewhere: list[int]  # unsent intents to others whose params quote it: left

    @property
    def intents(self) -> int:
        return self.finished_intents + len(self.unfinished)


@dataclasses.dataclass(frozen=True)
class ErasureReport:
    token: str
    intents_deleted: int
    cancelled: int
    events_deleted: int
    audit_entries: int
    suppression_kept: bool
    params_scrubbed: int
    unsent_elsewhere: list[int]


def _to_address(address: str):
    return func.lower(Intent.recipient) == address


def _events_naming(address: str):
    return or_(
        func.lower(ProviderEvent.recipient) == address,
        mentions(ProviderEvent.diagnostic, address),
        mentions(ProviderEvent.payload, address),
    )


def _quoting_elsewhere(address: str):
    return select(Intent.id, Intent.status).where(
        ~_to_address(address), mentions(Intent.params, address)
    )


def preview(session: Session, address: str, *, secret_key: str) -> ErasurePreview:
    """Count what erasing `address` would remove; ActionRefused for an invalid address."""
    if not secret_key:
        raise ActionRefused("secret_key_missing")
    address = normalized_address(address)
    intents = session.execute(select(Intent.id, Intent.status).where(_to_address(address))).all()
    ids = [row.id for row in intents]
    events = select(func.count()).where(
        or_(ProviderEvent.intent_id.in_(ids), _events_naming(address))
    )
    audit = select(func.count()).select_from(AuditEntry).where(audit_naming(address))
    elsewhere = session.execute(_quoting_elsewhere(address)).all()
    suppressed = select(Suppression.id).where(Suppression.recipient == address)
    return ErasurePreview(
        address=address,
        token=address_hash(secret_key, address),
        finished_intents=sum(row.status in TERMINAL_STATUSES for row in intents),
        unfinished=[(row.id, row.status) for row in intents if row.status not in TERMINAL_STATUSES],
        events=session.execute(events).scalar_one(),
        audit_entries=session.execute(audit).scalar_one(),
        suppressed=session.execute(suppressed).first() is not None,
        params_elsewhere=sum(row.status in TERMINAL_STATUSES for row in elsewhere),
        unsent_elsewhere=[row.id for row in elsewhere if row.status not in TERMINAL_STATUSES],
    )


def _cancel(session: Session, unfinished: list[tuple[int, str]], now: dt.datetime) -> int:
    """Cancel the unfinished intents, each only if still in the status read."""
    cancelled = 0
    for intent_id, status in unfinished:
        cancelled += session.execute(
            update(Intent)
            .where(Intent.id == intent_id, Intent.status == status)
            .values(status=CANCELLED, status_reason=CANCELLED_REASON, lease_token=null(),
                    lease_expires_at=null(), updated_at=now)
            .execution_options(synchronize_session=False)
        ).rowcount  # fmt: skip
    return cancelled


def _keep_suppression_as_hash(session: Session, address: str, token: str) -> bool:
    """Turn the suppression of `address` into one of `token`; return whether one is kept."""
    held = dict(
        session.execute(
            select(Suppression.recipient, Suppression.id).where(
                Suppression.recipient.in_([address, token])
            )
        ).all()
    )
    if address in held:
        plain = Suppression.id == held[address]
        if token in held:  # forgotten before, suppressed again since
            statement = delete(Suppression).where(plain)
        else:
            statement = update(Suppression).where(plain).values(recipient=token, note=null())
        session.execute(statement, execution_options={"synchronize_session": False})
    return bool(held)


def _scrub_params_elsewhere(
    session: Session, address: str, now: dt.datetime
) -> tuple[int, list[int]]:
    rows = session.execute(_quoting_elsewhere(address)).all()
    finished = [row.id for row in rows if row.status in TERMINAL_STATUSES]
    if finished:
        session.execute(
            update(Intent)
            .where(Intent.id.in_(finished), Intent.status.in_(TERMINAL_STATUSES))
            .values(params=null(), params_scrubbed_at=now)
            .execution_options(synchronize_session=False)
        )
    return len(finished), [row.id for row in rows if row.status not in TERMINAL_STATUSES]


def _redact_mentions(session: Session, address: str, token: str) -> int:
    """The address replaced by its hash where rows that stay quote it; return the audit count."""
    redact_suppression_notes(session, address, token)
    redact_hold_reasons(session, address, token)
    forget_login_failures(session, address)
    return redact_audit_entries(session, address, token)


def forget(
    session: Session,
    address: str,
    *,
    actor: str,
    reason: str,
    secret_key: str,
    cancel: bool = False,
    now: dt.datetime | None = None,
) -> ErasureReport:
    """Erase `address` from every table in the caller's transaction; never commits.

    ActionRefused (nothing changed) for an invalid address, a missing reason or,
    without `cancel`, intents still unfinished; StaleAction when an intent to the
    address was requeued while the erasure ran (roll back and try again).
    """
    now = now or utcnow()
    reason = required_reason(reason)
    plan = preview(session, address, secret_key=secret_key)
    address, token = plan.address, plan.token
    if plan.unfinished and not cancel:
        unfinished, count = plan.unfinished[:LISTED], len(plan.unfinished)
        raise ActionRefused("intents_unfinished", unfinished=unfinished, count=count)
    wipe_when_committed(session)
    cancelled = _cancel(session, plan.unfinished, now)
    ids = list(session.execute(select(Intent.id).where(_to_address(address))).scalars())
    matched = session.execute(
        delete(ProviderEvent).where(ProviderEvent.intent_id.in_(ids)),
        execution_options={"synchronize_session": False},
    ).rowcount
    deleted = delete_finished_intents(session, ids)
    if len(deleted) != len(ids):
        raise StaleAction("address_changed")
    naming = session.execute(
        delete(ProviderEvent).where(_events_naming(address)),
        execution_options={"synchronize_session": False},
    ).rowcount
    suppression_kept = _keep_suppression_as_hash(session, address, token)
    audited = _redact_mentions(session, address, token)
    scrubbed, unsent = _scrub_params_elsewhere(session, address, now)
    report = ErasureReport(token, len(deleted), cancelled, matched + naming, audited,
                           suppression_kept, scrubbed, unsent)  # fmt: skip
    details = {k: v for k, v in dataclasses.asdict(report).items() if k != "token"}
    details["unsent_elsewhere"] = unsent[:LISTED]
    reason = replace_forms(reason, address, token)  # the reason may quote the address
    entry = audit_values(
        actor=actor, action=ERASE_ACTION, now=now, target=token, reason=reason, details=details
    )
    write_audit(session, [entry])
    return report
