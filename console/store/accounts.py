"""Console accounts: create one with a role, deactivate or reactivate it; each audited."""

from __future__ import annotations

import datetime as dt
import unicodedata

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from console.models import OperatorUser, utcnow
from console.store.actions import ActionRefused, StaleAction
from console.store.audit import audit_values, write_audit
from console.vocabulary import ROLES

MIN_PASSWORD_LENGTH = 8


def normalize_username(raw: str) -> str:
    """The username as typed, NFKC-normalised (full-width letters become ASCII) and stripped."""
    return unicodedata.normalize("NFKC", raw).strip()


def username_key(raw: str) -> str:
    """The case-insensitive form of a username: what two accounts may not share."""
    return normalize_username(raw).casefold()


class UserError(ValueError):
    """The account cannot be created or changed as asked."""


def create_user(session: Session, username: str, password: str, role: str) -> OperatorUser:
    """Add an operator with a scrypt-hashed password to `session` (no commit)."""
    username = username.strip()
    if not username or len(username) > 100:
        raise UserError("username must be 1 to 100 characters")
    if role not in ROLES:
        raise UserError(f"role must be one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
    exists = session.execute(select(OperatorUser.id).where(OperatorUser.username == username))
    if exists.first() is not None:
        raise UserError(f"user {username!r} already exists")
    user = OperatorUser(
        username=username,
        password_hash=generate_password_hash(password),
        role=role,
        active=True,
        created_at=utcnow(),
    )
    session.add(user)
    return user


def find_user(session: Session, username: str) -> OperatorUser | None:
    """Return the account named `username`, or None."""
    query = select(OperatorUser).where(OperatorUser.username == username)
    return session.execute(query).scalar_one_or_none()


def load_user(session: Session, user_id: int) -> OperatorUser | None:
    """Return the account with id `user_id`, or None."""
    return session.get(OperatorUser, user_id)


def list_users(session: Session) -> list[OperatorUser]:
    """Return every account, by username."""
    query = select(OperatorUser).order_by(OperatorUser.username)
    return list(session.execute(query).scalars())


def put_user(session: Session, username: str, password: str, role: str) -> OperatorUser:
    """Create the account, or give it `password` and `role` and reactivate it (no commit)."""
    user = find_user(session, username)
    if user is None:
        return create_user(session, username, password, role)
    user.password_hash = generate_password_hash(password)
    user.role, user.active = role, True
    return user


def mark_logged_in(user: OperatorUser, now: dt.datetime) -> None:
    """Record that `user` logged in at `now` (the caller commits)."""
    user.last_login_at = now


def verify_password(user: OperatorUser, password: str) -> bool:
    """Return whether `password` matches the stored hash of `user`."""
    return check_password_hash(user.password_hash, password)


def add_user(
    session: Session,
    username: str,
    password: str,
    role: str,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Create an account (create_user rules) and audit it; UserError on bad input."""
    now = now or utcnow()
    user = create_user(session, username, password, role)
    entry = audit_values(
        actor=actor, action="user_create", now=now, target=user.username, details={"role": role}
    )
    write_audit(session, [entry])
    return user


def set_user_active(
    session: Session,
    user_id: int,
    active: bool,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Deactivate (or reactivate) an account; never the actor's own, never the last admin."""
    now = now or utcnow()
    user = session.get(OperatorUser, user_id)
    if user is None:
        raise ActionRefused(f"user {user_id} does not exist")
    if user.username == actor and not active:
        raise ActionRefused("you cannot deactivate your own account")
    if bool(user.active) == active:
        state = "active" if active else "deactivated"
        raise StaleAction(f"{user.username} is already {state}: nothing was done")
    if not active and user.role == "admin" and _active_admins(session) <= 1:
        raise ActionRefused("the last active admin cannot be deactivated")
    changed = session.execute(
        update(OperatorUser)
        .where(OperatorUser.id == user_id, OperatorUser.active == (not active))
        .values(active=active)
        .execution_options(synchronize_session=False)
    ).rowcount
    if changed != 1:
        raise StaleAction(f"{user.username} changed meanwhile: nothing was done")
    session.refresh(user)
    action = "user_activate" if active else "user_deactivate"
    write_audit(session, [audit_values(actor=actor, action=action, now=now, target=user.username)])
    return user


def _active_admins(session: Session) -> int:
    query = select(func.count()).where(OperatorUser.role == "admin", OperatorUser.active)
    return session.execute(query).scalar_one()
