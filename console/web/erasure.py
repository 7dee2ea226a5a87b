"""Erasure requests for admins: preview what forgetting an address removes, then do it.

The same action as ``console forget``: the preview counts what goes, the
confirmation runs the erasure in one transaction and shows only the address's
keyed hash afterwards.

Both forms answer with a 303 to ``/erasure`` (post/redirect/get). What was typed
travels in the signed session, not the address bar, so the address stays out of
URLs and access logs; the erasure itself, or ``/erasure?new=1``, drops it.
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, render_template, request, session
from flask_login import current_user

from console.store import actions, erasure, suppressions
from console.store.suppressions import is_suppressed
from console.vocabulary import ADMIN
from console.web import erasure_words, forms
from console.web.auth import role_required
from console.web.display import join_sentences
from console.web.extensions import db

bp = Blueprint("erasure", __name__, url_prefix="/erasure")
_TYPED = "erasure_form"  # the session key of what the form last sent


def _secret_key() -> str:
    return current_app.extensions["console.settings"].secret_key


def _form() -> dict[str, object]:
    return dict(
        address=request.form.get("address", "").strip()[:320],
        reason=request.form.get("reason", "").strip()[: actions.MAX_REASON_LENGTH],
        cancel=request.form.get("cancel") == "1",
        suppress=request.form.get("suppress") == "1",
    )


@bp.get("")
@role_required(ADMIN)
def index():
    """The form, or the preview of what the last previewed address's erasure removes."""
    if request.args.get("new"):
        session.pop(_TYPED, None)
    form = session.get(_TYPED) or {}
    plan, error = None, None
    if form.get("previewed"):
        try:
            plan = erasure.preview(db.session, str(form["address"]), secret_key=_secret_key())
        except actions.ActionRefused as exc:
            error = forms.refusal_words("No preview", exc)
        finally:
            db.session.rollback()
    return render_template("erasure/index.html", form=form, plan=plan, error=error)


@bp.post("/preview")
@role_required(ADMIN)
def preview():
    """Check the request, then show on ``/erasure`` what it would remove; nothing changes yet."""
    form = _form()
    try:
        actions.required_reason(str(form["reason"]))
        erasure.preview(db.session, str(form["address"]), secret_key=_secret_key())
    except actions.ActionRefused as exc:
        session[_TYPED] = {**form, "previewed": False}
        return forms.refused(forms.refusal_words("No preview", exc), "erasure.index")
    finally:
        db.session.rollback()
    session[_TYPED] = {**form, "previewed": True}
    return forms.redirect_to("erasure.index")


@bp.post("")
@role_required(ADMIN)
def forget():
    form = _form()
    try:
        if form["suppress"]:
            _suppress_first(str(form["address"]), str(form["reason"]))
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
        return forms.stale_or_refused(
            exc, "Not erased", lambda error: _stale(form, error), "erasure.index"
        )
    session.pop(_TYPED, None)
    first, *rest = erasure_words.summary(report).splitlines()
    return forms.done(join_sentences(f"The erasure {first}", *rest), "erasure.index")


def _suppress_first(address: str, reason: str) -> None:
    """Suppress the address in the erasure's transaction: the erasure keeps it as the hash."""
    if not is_suppressed(db.session, suppressions.normalized_address(address)):
        suppressions.add_suppression(db.session, address, actor=current_user.username,
                                     reason=reason)  # fmt: skip


def _stale(form: dict[str, object], error: str):
    session[_TYPED] = {**form, "previewed": False}
    return render_template("erasure/index.html", form=form, error=error), 409


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
