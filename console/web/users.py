"""Account management for admins: create accounts, set roles and passwords, deactivate them."""

from __future__ import annotations

import functools

from flask import Blueprint, Flask, flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import func, select, update

from console.models import AuditEntry
from console.store import accounts, actions
from console.store.accounts import UserError
from console.vocabulary import ROLES
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("users", __name__, url_prefix="/users")


def _render_list(status_code: int = 200, **extra):
    users = accounts.list_users(db.session)
    return render_template("users/index.html", users=users, roles=ROLES, **extra), status_code


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
        return _render_list(422, error=str(exc), username=username, role=role)
    flash(f"Created {user.role} {user.username}.", "success")
    return redirect(url_for("users.index"), code=303)


def _apply(change, done: str):
    """Run `change()` (a store call), commit, and say `done` (formatted with the user)."""
    try:
        user = change()
        db.session.commit()
    except (actions.ActionRefused, UserError) as exc:
        db.session.rollback()
        status_code = 409 if isinstance(exc, actions.StaleAction) else 422
        return _render_list(status_code, error=str(exc))
    flash(done.format(user=user), "success")
    return redirect(url_for("users.index"), code=303)


REASON_LONGEST = 2000


def _deactivate_with_reason(user_id: int, actor: str, reason: str):
    """Deactivate the account and put `reason` on the audit entry that just wrote."""
    if len(reason) > REASON_LONGEST:
        raise UserError(f"the reason is longer than {REASON_LONGEST} characters")
    user = accounts.set_user_active(db.session, user_id, False, actor=actor)
    if reason:
        entry = (
            select(func.max(AuditEntry.id))
            .where(AuditEntry.action == "user_deactivate")
            .where(AuditEntry.actor == actor, AuditEntry.target == user.username)
            .scalar_subquery()
        )
        db.session.execute(
            update(AuditEntry)
            .where(AuditEntry.id == entry)
            .values(reason=reason)
            .execution_options(synchronize_session=False)
        )
    return user


def _set_active(user_id: int, active: bool):
    actor = current_user.username
    if active:
        change = functools.partial(accounts.set_user_active, db.session, user_id, True, actor=actor)
    else:
        reason = request.form.get("reason", "").strip()
        change = functools.partial(_deactivate_with_reason, user_id, actor, reason)
    return _apply(
        change,
        "{user.username} is " + ("active." if active else "deactivated; their sessions ended."),
    )


@bp.post("/<int:user_id>/deactivate")
@role_required("admin")
def deactivate(user_id: int):
    return _set_active(user_id, False)


@bp.post("/<int:user_id>/activate")
@role_required("admin")
def activate(user_id: int):
    return _set_active(user_id, True)


@bp.post("/<int:user_id>/role")
@role_required("admin")
def set_role(user_id: int):
    role, actor = request.form.get("role", ""), current_user.username
    return _apply(
        lambda: accounts.set_user_role(db.session, user_id, role, actor=actor),
        "{user.username} is now {user.role}; their sessions ended.",
    )


@bp.post("/<int:user_id>/password")
@role_required("admin")
def set_password(user_id: int):
    password, actor = request.form.get("password", ""), current_user.username
    return _apply(
        lambda: accounts.set_password(db.session, user_id, password, actor=actor),
        "{user.username} has a new password; their sessions ended.",
    )


def init_app(app: Flask) -> None:
    from console.web import account

    app.register_blueprint(bp)
    account.init_app(app)
