r"""Addresses in the audit log, the suppression notes and the holds replaced by their keyed hash.

The retention pass does it to audit entries older than ``CONSOLE_RETENTION_DAYS``; an erasure
(``console forget``) does it at once to every entry naming one address. An entry keeps who, what
and when: only the address changes, in its target and wherever its reason or details quote it.

An address is found in any letter case and in each form text holds it in (``written_forms``):
plain, URL-encoded (a search's query string in an export's target) and JSON-escaped (``\u0040``,
non-ASCII letters as their ``\u`` escapes).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, quote_plus

from sqlalchemy import Text, cast, func, or_, select, update
from sqlalchemy.orm import Session

from console.core.address_hash import replace_address, replace_address_in
from console.models import AuditEntry, Suppression
from console.state_tables import IntentHold

AUDIT_COLUMNS = (AuditEntry.id, AuditEntry.target, AuditEntry.reason, AuditEntry.details)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


def _encoded(address: str) -> set[str]:
    escaped = json.dumps(address)[1:-1]
    return {
        address,
        address.replace("@", "%40"),
        quote(address, safe=""),
        quote(address),
        quote_plus(address),
        escaped,
        escaped.replace("@", "\\u0040"),
    }


def written_forms(address: str) -> tuple[str, ...]:
    """`address` as text may hold it, ASCII letters lower-cased, longest first.

    Its non-ASCII letters come lower-cased and upper-cased too: SQLite's ``lower``
    folds ASCII letters only.
    """
    plain = address.strip().lower()
    upper = "".join(c.upper() if ord(c) > 127 else c for c in plain)
    forms = {_ascii_lower(form) for variant in {plain, upper} for form in _encoded(variant)}
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def mentions(column: Any, address: str) -> Any:
    """SQL: `column` (text or JSON) contains `address`, in any letter case and written form."""
    text = func.lower(cast(column, Text))
    return or_(*(text.contains(form, autoescape=True) for form in written_forms(address)))


def replace_forms(text: str | None, address: str, token: str) -> str | None:
    """`text` with `address`, in any letter case and written form, replaced by `token`."""
    for form in written_forms(address):
        text = replace_address(text, form, token)
    return text


def replace_forms_in(value: Any, address: str, token: str) -> Any:
    """A JSON-like `value` with `address` in every form replaced by `token`, keys too."""
    for form in written_forms(address):
        value = replace_address_in(value, form, token)
    return value


def audit_naming(address: str) -> Any:
    """SQL: the audit entry names `address` in its target, reason or details."""
    return or_(
        mentions(AuditEntry.target, address),
        mentions(AuditEntry.reason, address),
        mentions(AuditEntry.details, address),
    )


def redacted(row: Any, address: str, token: str) -> dict[str, Any]:
    """The new values of audit entry `row` with `address` replaced by `token`."""
    target = row.target
    if target is not None and target.strip().lower() == address:
        target = token
    return dict(
        id=row.id,
        target=replace_forms(target, address, token),
        reason=replace_forms(row.reason, address, token),
        details=replace_forms_in(row.details, address, token),
    )


def write_redacted(session: Session, values: list[dict[str, Any]]) -> None:
    """Write the redacted values of audit entries, by primary key; never commits."""
    if values:
        session.execute(update(AuditEntry), values)  # by primary key, one statement per row


def redact_audit_entries(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in every audit entry naming it; never commits.

    Return how many entries changed.
    """
    rows = session.execute(select(*AUDIT_COLUMNS).where(audit_naming(address))).all()
    write_redacted(session, [redacted(row, address, token) for row in rows])
    return len(rows)


def redact_suppression_notes(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the notes of other suppressions; never commits."""
    return _redact_text_column(session, Suppression, "note", address, token)


def redact_hold_reasons(session: Session, address: str, token: str) -> int:
    """Replace `address` by `token` in the reasons of holds; never commits."""
    return _redact_text_column(session, IntentHold, "reason", address, token)


def _redact_text_column(session: Session, model, name: str, address: str, token: str) -> int:
    """Replace `address` by `token` in column `name` of `model`'s rows; how many changed."""
    column = getattr(model, name)
    rows = session.execute(select(model.id, column).where(mentions(column, address))).all()
    values = [{"id": row.id, name: replace_forms(row[1], address, token)} for row in rows]
    if values:
        session.execute(update(model), values)
    return len(values)
