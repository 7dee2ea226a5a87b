"""Account management for admins: create accounts, set roles and passwords, deactivate them.

Every form here answers with a 303 to the users page (console.web.forms), done or refused;
a stale one (a name another admin took a moment before) with the page as it is now and 409.
"""

from __future__ import annotations

from flask import Blueprint, Flask, render_template, request
from flask_login import current_user

from console.store import accounts, actions
from console.store.accounts import UserError, UsernameTaken
from console.vocabulary import ROLES
from console.web import forms
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("users", __name__, url_prefix="/users")


def _render_list(status_code: int = 200, **extra):
    users = accounts.list_users(db.session)
    kept = dict(username=request.args.get("username", "")[:64], role=request.args.get("role", ""))
    context = dict(users=users, roles=ROLES, **kept)
    return render_template("users/index.html", **{**context, **extra}), status_code


@bp.get("")
@role_required("admin")
def index():
    return _render_list()


@bp.post("")
@role_required("admin")
def create():
    username = request.form.get("username", "")
    role = request.form.get("role", "")
    try:
        user = accounts.add_user(
            db.session,
            username,
            request.form.get("password", ""),
            role,
            actor=current_user.username,
        )
        db.session.commit()
    except UserError as exc:
        db.session.rollback()
        kept = dict(username=username[:64], role=role if role in ROLES else None)
        if isinstance(exc, UsernameTaken):  # created meanwhile by another request: 409
            forms.stands_for("users.index", **kept)
            return _render_list(409, error=forms.refusal_words("Not created", exc), **kept)
        return forms.refused(forms.refusal_words("Not created", exc), "users.index", **kept)
    return forms.done(f"Created {user.role} {user.username}.", "users.index")


def _apply(change, done: str, not_done: str):
    """Run `change()` (a store call) and commit; say `done` or why it was `not_done`."""
    try:
        user = change()
        db.session.commit()
    except (actions.ActionRefused, UserError) as exc:
        db.session.rollback()
        return forms.stale_or_refused(
            exc, not_done, lambda error: _render_list(409, error=error), "users.index"
        )
    return forms.done(done.format(user=user), "users.index")


@bp.post("/<int:user_id>/deactivate")
@role_required("admin")
def deactivate(user_id: int):
    """Deactivate an account; the reason is required and kept on its audit entry."""
    actor, reason = current_user.username, request.form.get("reason", "")
    return _apply(
        lambda: accounts.set_user_active(db.session, user_id, False, actor=actor, reason=reason),
        "{user.username} is deactivated; their sessions ended.",
        "Not deactivated",
    )


@bp.post("/<int:user_id>/activate")
@role_required("admin")
def activate(user_id: int):
    actor = current_user.username
    return _apply(
        lambda: accounts.set_user_active(db.session, user_id, True, actor=actor),
        "{user.username} is active.",
        "Not reactivated",
    )


@bp.post("/<int:user_id>/role")
@role_required("admin")
def set_role(user_id: int):
    role, actor = request.form.get("role", ""), current_user.username
    return _apply(
        lambda: accounts.set_user_role(db.session, user_id, role, actor=actor),
        "{user.username} is now {user.role}; their sessions ended.",
        "Role not changed",
    )


@bp.post("/<int:user_id>/password")
@role_required("admin")
def set_password(user_id: int):
    password, actor = request.form.get("password", ""), current_user.username
    return _apply(
        lambda: accounts.set_password(db.session, user_id, password, actor=actor),
        "{user.username} has a new password; their sessions ended.",
        "Password not changed",
    )


def init_app(app: Flask) -> None:
    from console.web import account

    app.register_blueprint(bp)
    account.init_app(app)
