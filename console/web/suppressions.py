"""The suppression list: browse and search it; operators add and remove addresses."""

from __future__ import annotations

from flask import Blueprint, Flask, flash, redirect, render_template, request, url_for
from flask_login import current_user

from console.store import actions
from console.store import suppressions as suppression_store
from console.vocabulary import OPERATOR, VIEWER
from console.web.auth import role_required
from console.web.extensions import db
from console.worker import wakeup

bp = Blueprint("suppressions", __name__, url_prefix="/suppressions")


def _render_list(status_code: int = 200, **extra):
    q = request.values.get("q", "").strip()[:320]
    raw_before = request.args.get("before", "")
    before = int(raw_before) if raw_before.isdigit() else None
    page = suppression_store.suppression_page(db.session, q=q, before=before)
    template = "suppressions/_rows.html" if request.htmx else "suppressions/index.html"
    return render_template(template, page=page, q=q, **extra), status_code


@bp.get("")
@role_required(VIEWER)
def index():
    return _render_list()


@bp.post("")
@role_required(OPERATOR)
def add():
    address = request.form.get("address", "")
    try:
        suppression_store.add_suppression(
            db.session, address, actor=current_user.username, reason=request.form.get("reason")
        )
    except actions.ActionRefused as exc:
        db.session.rollback()
        status_code = 409 if isinstance(exc, actions.StaleAction) else 422
        return _render_list(status_code, error=str(exc), address=address)
    db.session.commit()
    flash(f"{suppression_store.normalized_address(address)} is suppressed.", "success")
    return redirect(url_for("suppressions.index"), code=303)


@bp.post("/<int:suppression_id>/remove")
@role_required(OPERATOR)
def remove(suppression_id: int):
    """Remove a suppression, then offer to requeue the mail it held back."""
    try:
        recipient = suppression_store.remove_suppression(
            db.session,
            suppression_id,
            actor=current_user.username,
            reason=request.form.get("reason"),
        )
    except actions.ActionRefused as exc:
        db.session.rollback()
        status_code = 409 if isinstance(exc, actions.StaleAction) else 422
        return _render_list(status_code, error=str(exc))
    db.session.commit()
    held_back = suppression_store.held_back_count(db.session, recipient)
    flash(f"{recipient} is no longer suppressed.", "success")
    return render_template("suppressions/removed.html", recipient=recipient, held_back=held_back)


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
        db.session.rollback()
        return _render_list(422, error=str(exc))
    db.session.commit()
    if released:
        wakeup.notify()
    flash(f"Requeued {released} intents for {recipient}.", "success")
    return redirect(url_for("intents.search", q=recipient), code=303)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
