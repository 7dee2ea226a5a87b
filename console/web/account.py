"""A user's own account: change the password (the current one required), end other sessions."""

from __future__ import annotations

from flask import Blueprint, Flask, render_template, request, session
from flask_login import current_user, login_required

from console.store import accounts
from console.store.accounts import UserError
from console.web import forms, sessions
from console.web.extensions import db

bp = Blueprint("account", __name__, url_prefix="/account")


@bp.get("")
@login_required
def index():
    return render_template("users/account.html")


@bp.post("/password")
@login_required
def change_password():
    """Set a new password; every other session of the account ends, this one goes on."""
    new = request.form.get("new_password", "")
    if new != request.form.get("new_password_again", ""):
        return forms.refused("Not changed: the new passwords differ.", "account.index")
    try:
        generation = accounts.change_password(
            db.session, current_user, request.form.get("current_password", ""), new
        )
        db.session.commit()
    except UserError as exc:
        db.session.rollback()
        return forms.refused(forms.refusal_words("Not changed", exc), "account.index")
    sessions.keep_after_change(session, generation)
    return forms.done("Your password is changed; your other sessions have ended.", "account.index")


@bp.post("/sessions/end")
@login_required
def end_other_sessions():
    """Log out everywhere else: every session of the account but this one ends."""
    generation = accounts.end_sessions(db.session, current_user)
    db.session.commit()
    sessions.keep_after_change(session, generation)
    return forms.done("Your other sessions have ended.", "account.index")


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
