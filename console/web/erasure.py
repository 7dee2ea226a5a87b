"""Erasure requests for admins: preview what forgetting an address removes, then do it.

The same action as ``console forget``: the preview counts what goes, the
confirmation runs the erasure in one transaction and shows only the address's
keyed hash afterwards.
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from console.store import actions, erasure
from console.vocabulary import ADMIN
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("erasure", __name__, url_prefix="/erasure")


def _secret_key() -> str:
    return current_app.extensions["console.settings"].secret_key


def _form() -> dict[str, object]:
    return dict(
        address=request.form.get("address", "").strip()[:320],
        reason=request.form.get("reason", "").strip(),
        cancel=request.form.get("cancel") == "1",
    )


def _render(status_code: int = 200, **extra):
    return render_template("erasure/index.html", **extra), status_code


@bp.get("")
@role_required(ADMIN)
def index():
    return _render(form={})


@bp.post("/preview")
@role_required(ADMIN)
def preview():
    """Show what an erasure of the address would remove; nothing changes yet."""
    form = _form()
    try:
        actions.required_reason(str(form["reason"]))
        plan = erasure.preview(db.session, str(form["address"]), secret_key=_secret_key())
    except actions.ActionRefused as exc:
        return _render(422, form=form, error=str(exc))
    finally:
        db.session.rollback()
    return _render(form=form, plan=plan)


@bp.post("")
@role_required(ADMIN)
def forget():
    form = _form()
    try:
        report = erasure.forget(
            db.session,
            str(form["address"]),
            actor=current_user.username,
            reason=str(form["reason"]),
            secret_key=_secret_key(),
            cancel=bool(form["cancel"]),
        )
        db.session.commit()
    except actions.ActionRefused as exc:
        db.session.rollback()
        status_code = 409 if isinstance(exc, actions.StaleAction) else 422
        return _render(status_code, form=form, error=str(exc))
    flash(erasure.summary(report), "success")
    return redirect(url_for("erasure.index"), code=303)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
