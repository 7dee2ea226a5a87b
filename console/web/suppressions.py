"""The suppression list: browse and search it; operators add and remove addresses.

Every form answers with a 303 to a GET page (console.web.forms); a stale one
(already suppressed, already removed) with the list as it is now and 409.
"""

from __future__ import annotations

from flask import Blueprint, Flask, render_template, request
from flask_login import current_user

from console import wakeup
from console.core.whole_numbers import whole_number
from console.store import actions
from console.store import suppressions as suppression_store
from console.store.suppressions import is_suppressed
from console.vocabulary import OPERATOR, VIEWER
from console.web import forms
from console.web.auth import role_required
from console.web.display import plural
from console.web.extensions import db

bp = Blueprint("suppressions", __name__, url_prefix="/suppressions")
ADDRESS_LONGEST = 320


def _render_list(status_code: int = 200, **extra):
    q = request.args.get("q", "").strip()[:ADDRESS_LONGEST]
    before = whole_number(request.args.get("before"))  # not a number: the first page
    page = suppression_store.suppression_page(db.session, q=q, before=before)
    template = "suppressions/_rows.html" if request.htmx else "suppressions/index.html"
    context = dict(page=page, q=q, address=request.args.get("address", "")[:ADDRESS_LONGEST])
    return render_template(template, **{**context, **extra}), status_code


@bp.get("")
@role_required(VIEWER)
def index():
    return _render_list()


def _refused(exc: actions.ActionRefused, not_done: str, **values):
    db.session.rollback()
    return forms.stale_or_refused(
        exc,
        not_done,
        lambda error: _render_list(409, error=error),
        "suppressions.index",
        **values,
    )


@bp.post("")
@role_required(OPERATOR)
def add():
    address = request.form.get("address", "")
    try:
        suppression_store.add_suppression(
            db.session, address, actor=current_user.username, reason=request.form.get("reason")
        )
    except actions.ActionRefused as exc:
        return _refused(exc, "Not suppressed", address=address.strip()[:ADDRESS_LONGEST])
    db.session.commit()
    normalized = suppression_store.normalized_address(address)
    return forms.done(f"{normalized} is suppressed.", "suppressions.index")


@bp.post("/<int:suppression_id>/remove")
@role_required(OPERATOR)
def remove(suppression_id: int):
    """Remove a suppression, then offer (on a GET page) to requeue the mail it held back."""
    try:
        recipient = suppression_store.remove_suppression(
            db.session,
            suppression_id,
            actor=current_user.username,
            reason=request.form.get("reason"),
        )
    except actions.ActionRefused as exc:
        return _refused(exc, "Not removed")
    db.session.commit()  # the page it leads to says so in its heading
    return forms.redirect_to("suppressions.removed", recipient=recipient)


@bp.get("/removed")
@role_required(OPERATOR)
def removed():
    """What a removed suppression held back, with the form that requeues it."""
    recipient = request.args.get("recipient", "").strip()[:ADDRESS_LONGEST]
    if not recipient:  # nothing to say about no address: the list
        return forms.redirect_to("suppressions.index")
    still = bool(recipient) and is_suppressed(db.session, recipient)
    held_back = 0 if still else suppression_store.held_back_count(db.session, recipient)
    return render_template(
        "suppressions/removed.html", recipient=recipient, held_back=held_back, still=still
    )


@bp.post("/release")
@role_required(OPERATOR)
def release():
    """Requeue the intents a removed suppression held back."""
    recipient = request.form.get("recipient", "")
    try:
        released = suppression_store.release_held_back(
            db.session, recipient, actor=current_user.username, reason=request.form.get("reason")
        )
    except actions.ActionRefused as exc:
        return _refused(exc, "Nothing was requeued")
    db.session.commit()
    if released:
        wakeup.notify()
    message = f"Requeued {plural(released, 'intent')} for {recipient}."
    return forms.done(message, "intents.search", q=recipient)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
