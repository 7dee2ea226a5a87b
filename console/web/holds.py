"""Holds in the console: what is held and how many intents wait behind each; operators hold
and release a lane, a template or a recipient domain, each audited with its reason.

The dashboard, the templates page and an intent's page link here with ``?kind=&value=``;
this page carries the forms, so a live-refreshed dashboard never swallows a half-typed reason.
"""

from __future__ import annotations

import datetime as dt

from flask import Blueprint, Flask, g, render_template, request
from flask_login import current_user
from markupsafe import Markup, escape
from sqlalchemy.exc import SQLAlchemyError

from console import wakeup
from console.mail.catalog import catalog_for
from console.models import utcnow
from console.ops.hold_targets import known_selector, max_ages
from console.state_tables import HOLD_KINDS
from console.store import holds
from console.store.actions import ActionRefused, required_reason
from console.vocabulary import LANES, OPERATOR, VIEWER
from console.web import forms
from console.web.auth import has_role, role_required
from console.web.display import format_time, plural, timestamp_markup
from console.web.extensions import current_settings, db

bp = Blueprint("holds", __name__, url_prefix="/holds")


def holds_in_force() -> list[holds.HoldLine]:
    """The holds in force, read once per request (the banner, the sections, the buttons)."""
    if "holds_in_force" not in g:
        g.holds_in_force = holds.holds_in_force(db.session, utcnow())
    return g.holds_in_force


def holds_shown_in_navigation() -> int:
    """How many holds are in force, for the navigation; 0 when the database cannot say."""
    try:
        return len(holds_in_force())
    except SQLAlchemyError:
        db.session.rollback()
        return 0


def hold_on(kind: str, value: str) -> holds.HoldLine | None:
    """The hold in force on exactly this lane, template (every version) or domain."""
    value = value.lower() if kind == "domain" else value
    for line in holds_in_force():
        if line.selector == holds.Selector(kind, value):
            return line
    return None


def holds_stopping(intent) -> list[holds.HoldLine]:
    """The holds in force that stop `intent` (an Intent row)."""
    return holds.holds_on(
        holds_in_force(), lane=intent.lane, template=intent.template,
        version=intent.template_version, recipient=intent.recipient,
    )  # fmt: skip


def hold_until_words(until: dt.datetime | None) -> str:
    """How every page says when a hold ends: its end time, or that it has none."""
    return f"until {format_time(until)}" if until else "no end: until released"


def hold_until_markup(until: dt.datetime | None) -> Markup:
    """`hold_until_words` for a page: the end time kept on one line."""
    if until is None:
        return Markup(escape(hold_until_words(None)))
    return Markup("until ") + timestamp_markup(until)


def until_placeholder(now: dt.datetime) -> str:
    """An end time for the form's example: tomorrow 06:00 UTC, always in the future."""
    tomorrow = (now + dt.timedelta(days=1)).date()
    return f"{tomorrow.isoformat()} 06:00"


def _render(status_code: int = 200, **extra):
    kind = request.values.get("kind", "")
    kind = kind if kind in HOLD_KINDS else "template"
    value = request.values.get("value", "").strip()[:255]
    context = dict(kind=kind, value=value, kinds=HOLD_KINDS, lanes=LANES, selected=None,
                   until_example=until_placeholder(utcnow()))  # fmt: skip
    if value:
        context["selected"] = hold_on(kind, value)
    return render_template("holds/index.html", **{**context, **extra}), status_code


@bp.get("")
@role_required(VIEWER)
def index():
    return _render()


def _until(raw: str) -> dt.datetime | None:
    if not raw.strip():
        return None
    try:
        until = dt.datetime.fromisoformat(raw.strip())
    except ValueError:
        example = until_placeholder(utcnow())
        raise ActionRefused("time_unreadable", text=raw, example=example) from None
    return until if until.tzinfo else until.replace(tzinfo=dt.UTC)


@bp.post("")
@role_required(OPERATOR)
def place():
    catalog = catalog_for(current_settings())
    form = request.form
    try:
        selector = known_selector(form.get("kind", ""), form.get("value", "")[:255], catalog)
        holds.place_hold(
            db.session, selector, actor=current_user.username, reason=form.get("reason"),
            now=utcnow(), until=_until(form.get("until", "")[:64]),
        )  # fmt: skip
    except ActionRefused as exc:
        kept = dict(kind=form.get("kind", "")[:16], value=form.get("value", "").strip()[:255])
        return _refused(exc, "Not held", **kept)
    db.session.commit()
    message = f"{selector.notation()} is held: nothing of it is sent until it is released."
    return forms.done(message, "holds.index")


def _refused(exc: ActionRefused, not_done: str, **values):
    """A stale hold or release: this page now, 409; any other refusal: a 303 to it."""
    db.session.rollback()
    return forms.stale_or_refused(
        exc, not_done, lambda error: _render(409, error=error), "holds.index", **values
    )


@bp.post("/<int:hold_id>/release")
@role_required(OPERATOR)
def release(hold_id: int):
    catalog = catalog_for(current_settings())
    try:
        released = holds.release_hold(
            db.session, hold_id, actor=current_user.username,
            reason=required_reason(request.form.get("reason")), now=utcnow(),
            max_ages=max_ages(catalog),
        )  # fmt: skip
    except ActionRefused as exc:
        return _refused(exc, "Not released")
    db.session.commit()
    if released.waiting:
        wakeup.notify()
    expired = f"; {released.expired} expired while held" if released.expired else ""
    waiting = plural(released.waiting, "intent")
    message = f"{released.selector.notation()} is released: {waiting} due now"
    return forms.done(message + expired + ".", "holds.index")


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
    app.add_template_filter(hold_until_markup, "hold_until")

    @app.context_processor
    def hold_helpers():
        return dict(
            holds_in_force=holds_in_force, hold_on=hold_on, holds_stopping=holds_stopping,
            held_count=holds_shown_in_navigation,
            can_hold=lambda: has_role(OPERATOR),
        )  # fmt: skip
