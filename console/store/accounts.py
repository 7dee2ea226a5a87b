"""Console accounts: create, change password or role, deactivate, end sessions; each audited.

A new username is NFKC-normalised, holds ASCII letters, digits, ``.``, ``_`` and ``-`` only, is 3
to 64 characters long and unique whatever its case, so no account can pass for another (``Admin``
beside ``admin``, a Cyrillic ``а``, a zero-width space). Accounts created before these rules keep
their names.

Every login session carries its account's ``session_generation``; raising it (``end_sessions``)
ends them all, on every device. A new password, a role change and a deactivation raise it too.

Failed logins are counted in ``console.store.login_failures``.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from console.models import OperatorUser, utcnow
from console.store.actions import ActionRefused, StaleAction, required_reason
from console.store.audit import audit_values, write_audit
from console.vocabulary import ROLES
from console.words.refusals import Refusal

MIN_PASSWORD_LENGTH = 8
USERNAME_LENGTHS = (3, 64)
_USERNAME_CHARACTERS = re.compile(r"[A-Za-z0-9._-]+")


def normalize_username(raw: str) -> str:
    """The username as typed, NFKC-normalised (full-width letters become ASCII) and stripped."""
    return unicodedata.normalize("NFKC", raw).strip()


def username_key(raw: str) -> str:
    """The case-insensitive form of a username: what two accounts may not share."""
    return normalize_username(raw).casefold()


class UserError(Refusal, ValueError):
    """The account cannot be created or changed as asked: `reason` and its facts say why."""


class UsernameTaken(UserError):
    """Another transaction created an account with this username after it was checked."""


def new_username(session: Session, raw: str) -> str:
    """Return `raw` normalised if a new account may take it; UserError saying why not."""
    username = normalize_username(raw)
    shortest, longest = USERNAME_LENGTHS
    if not shortest <= len(username) <= longest:
        raise UserError("username_length", shortest=shortest, longest=longest)
    if not _USERNAME_CHARACTERS.fullmatch(username):
        raise UserError("username_characters")
    same = select(OperatorUser.username).where(
        func.lower(OperatorUser.username) == username.lower()
    )
    taken = session.execute(same.limit(1)).scalar_one_or_none()
    if taken is not None:
        raise UserError("username_taken", username=taken)
    return username


def create_user(session: Session, username: str, password: str, role: str) -> OperatorUser:
    """Add an operator with a scrypt-hashed password to `session` (no commit).

    UserError when the name is taken; UsernameTaken when another transaction
    created that account after the name was checked (the caller rolls back).
    """
    username = new_username(session, username)
    if role not in ROLES:
        raise UserError("role_unknown", roles=ROLES)
    _check_new_password(password)
    user = OperatorUser(
        username=username,
        password_hash=generate_password_hash(password),
        role=role,
        active=True,
        created_at=utcnow(),
    )
    session.add(user)
    try:
        session.flush()
    except IntegrityError as exc:
        if "username" not in str(exc.orig):
            raise
        raise UsernameTaken("username_taken_meanwhile", username=username) from None
    return user


def find_user(session: Session, username: str) -> OperatorUser | None:
    """Return the account named `username` as typed, normalised, or in another case; or None.

    An exact name wins; a name that matches only in another case must match one account.
    """
    normalized = normalize_username(username)
    for name in dict.fromkeys((username, normalized)):
        query = select(OperatorUser).where(OperatorUser.username == name)
        user = session.execute(query).scalar_one_or_none()
        if user is not None:
            return user
    query = select(OperatorUser).where(func.lower(OperatorUser.username) == normalized.lower())
    matches = session.execute(query.limit(2)).scalars().all()
    return matches[0] if len(matches) == 1 else None


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
    end_sessions(session, user)
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
    reason: str | None = None,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Deactivate (or reactivate) an account; never the actor's own, never the last admin.

    A deactivation needs a reason (ActionRefused when it is empty or only spaces),
    kept on its audit entry.
    """
    now = now or utcnow()
    reason = None if active else required_reason(reason)
    user = session.get(OperatorUser, user_id)
    if user is None:
        raise ActionRefused("user_missing", user_id=user_id)
    if user.username == actor and not active:
        raise ActionRefused("own_deactivation")
    if bool(user.active) == active:
        raise StaleAction("already_active", username=user.username, active=active)
    if not active and user.role == "admin" and _active_admins(session) <= 1:
        raise ActionRefused("last_admin_deactivation")
    changed = session.execute(
        update(OperatorUser)
        .where(OperatorUser.id == user_id, OperatorUser.active == (not active))
        .values(active=active)
        .execution_options(synchronize_session=False)
    ).rowcount
    if changed != 1:
        raise StaleAction("user_changed", username=user.username)
    end_sessions(session, user)
    action = "user_activate" if active else "user_deactivate"
    entry = audit_values(actor=actor, action=action, now=now, target=user.username, reason=reason)
    write_audit(session, [entry])
    return user


def _active_admins(session: Session) -> int:
    query = select(func.count()).where(OperatorUser.role == "admin", OperatorUser.active)
    return session.execute(query).scalar_one()


def end_sessions(session: Session, user: OperatorUser) -> int:
    """End every login session of `user` (no commit); return the new generation."""
    session.execute(
        update(OperatorUser)
        .where(OperatorUser.id == user.id)
        .values(session_generation=OperatorUser.session_generation + 1)
        .execution_options(synchronize_session=False)
    )
    session.refresh(user)
    return user.session_generation


def _check_new_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise UserError("password_too_short", shortest=MIN_PASSWORD_LENGTH)


def change_password(
    session: Session, user: OperatorUser, current: str, new: str, *, now: dt.datetime | None = None
) -> int:
    """Give `user` the password `new` if `current` is theirs; end their sessions; audit it.

    Returns the new session generation (the caller keeps its own session with it).
    """
    if not verify_password(user, current):
        raise UserError("password_wrong")
    _check_new_password(new)
    user.password_hash = generate_password_hash(new)
    generation = end_sessions(session, user)
    entry = audit_values(
        actor=user.username, action="password_change", now=now or utcnow(), target=user.username
    )
    write_audit(session, [entry])
    return generation


def _account(session: Session, user_id: int) -> OperatorUser:
    user = session.get(OperatorUser, user_id)
    if user is None:
        raise ActionRefused("user_missing", user_id=user_id)
    return user


def set_password(
    session: Session,
    user_id: int,
    password: str,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Give another account a new password (an admin, or the command line); end its sessions."""
    user = _account(session, user_id)
    _check_new_password(password)
    user.password_hash = generate_password_hash(password)
    end_sessions(session, user)
    entry = audit_values(
        actor=actor, action="user_password_set", now=now or utcnow(), target=user.username
    )
    write_audit(session, [entry])
    return user


def set_user_role(
    session: Session,
    user_id: int,
    role: str,
    *,
    actor: str,
    now: dt.datetime | None = None,
) -> OperatorUser:
    """Give an account another role and end its sessions; never the actor's own, never the
    last active admin's."""
    user = _account(session, user_id)
    if role not in ROLES:
        raise ActionRefused("role_unknown", roles=ROLES)
    if user.username == actor:
        raise ActionRefused("own_role")
    if user.role == role:
        raise StaleAction("already_role", username=user.username, role=role)
    if user.role == "admin" and user.active and _active_admins(session) <= 1:
        raise ActionRefused("last_admin_role")
    before, user.role = user.role, role
    end_sessions(session, user)
    entry = audit_values(
        actor=actor,
        action="user_role",
        now=now or utcnow(),
        target=user.username,
        details={"before": before, "after": role},
    )
    write_audit(session, [entry])
    return user
