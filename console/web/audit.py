"""The audit log: every operator action, newest first, filtered by user, action, intent, date."""

from __future__ import annotations

import datetime as dt
import re

from flask import Blueprint, Flask, render_template, request

from console.core.whole_numbers import whole_number
from console.store import audit as audit_store
from console.store.audit import AuditFilters
from console.vocabulary import OPERATOR
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("audit", __name__, url_prefix="/audit")

FILTER_FIELDS = ("actor", "action", "intent", "from", "to")
KNOWN_ACTIONS = (
    "ask_provider",
    "dead_letter",
    "export",
    "forget",
    "hold",
    "password_change",
    "preview",
    "reconcile_accepted",
    "reconcile_dead",
    "reconcile_resend",
    "release",
    "requeue",
    "suppression_add",
    "suppression_remove",
    "user_activate",
    "user_create",
    "user_deactivate",
    "user_password_set",
    "user_role",
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadFilter(ValueError):
    """A filter value the audit page cannot use; the message says which and why."""


def _text(name: str, label: str, longest: int) -> str | None:
    value = request.args.get(name, "").strip()
    if len(value) > longest:
        raise BadFilter(f"The {label} filter is longer than {longest} characters.")
    if _CONTROL.search(value):
        raise BadFilter(f"The {label} filter contains control characters.")
    return value or None


def _number(name: str, label: str) -> int | None:
    raw = request.args.get(name, "").strip().lstrip("#")
    if not raw:
        return None
    number = whole_number(raw)
    if number is None:
        raise BadFilter(f"The {label} must be a whole number such as 1234, not {raw[:30]!r}.")
    return number


def _date(name: str) -> dt.date | None:
    raw = request.args.get(name, "").strip()
    if not raw:
        return None
    try:
        if not _DATE.fullmatch(raw):
            raise ValueError(raw)
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise BadFilter(
            f"The '{name}' date must be a UTC date as YYYY-MM-DD, not {raw[:30]!r}."
        ) from None


def parse_filters() -> AuditFilters:
    """Read the filters from the query string; BadFilter with a clear message if one is bad."""
    action = _text("action", "action", 50)
    filters = AuditFilters(
        actor=_text("actor", "user", 100),
        action=action.replace(" ", "_") if action else None,
        intent_id=_number("intent", "intent id"),
        date_from=_date("from"),
        date_to=_date("to"),
    )
    if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
        raise BadFilter("The 'from' date is after the 'to' date: no entry can match.")
    return filters


@bp.get("")
@role_required(OPERATOR)
def index():
    shown = {name: request.args.get(name, "")[:100] for name in FILTER_FIELDS}
    active = {name: value for name, value in shown.items() if value.strip()}
    try:
        filters = parse_filters()
        before = _number("before", "'before' page marker")
    except BadFilter as exc:
        page = audit_store.AuditPage([], None)
        return render_template(
            "audit/index.html",
            page=page,
            shown=shown,
            active=active,
            actions=KNOWN_ACTIONS,
            error=str(exc),
        ), 400
    page = audit_store.audit_page(db.session, before=before, filters=filters)
    return render_template(
        "audit/index.html", page=page, shown=shown, active=active, actions=KNOWN_ACTIONS
    )


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
