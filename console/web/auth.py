"""Login, logout and roles: viewer (read), operator (actions), admin (users)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    abort,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_required, login_user, logout_user
from werkzeug.security import generate_password_hash

from console.core.whole_numbers import whole_number
from console.models import OperatorUser, utcnow
from console.store import accounts
from console.store.accounts import verify_password
from console.web import forms, sessions
from console.web.extensions import current_settings, db, login_manager
from console.web.throttle import login_throttle, wait_message

bp = Blueprint("auth", __name__)

ROLE_RANK = {"viewer": 1, "operator": 2, "admin": 3}
# Checked when the username is unknown, so both cases take the same time.
_UNKNOWN_USER_HASH = generate_password_hash("no such user: a hash to compare against")


def has_role(minimum: str) -> bool:
    """Return whether the logged-in user holds `minimum` or a higher role."""
    if not current_user.is_authenticated:
        return False
    return ROLE_RANK.get(current_user.role, 0) >= ROLE_RANK[minimum]


def role_required(minimum: str) -> Callable:
    """Let a view run only for a logged-in user with at least role `minimum` (else 403)."""

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        @login_required
        def wrapped(*args: Any, **kwargs: Any):
            if not has_role(minimum):
                abort(403)
            return view(*args, **kwargs)

        return wrapped

    return decorator


@login_manager.user_loader
def _load_user(user_id: str) -> OperatorUser | None:
    """The session's user, while the account is active and the session still valid."""
    number = whole_number(user_id)
    user = None if number is None else accounts.load_user(db.session, number)
    if user is None or not user.is_active:
        return None
    settings = current_settings()
    why = sessions.refusal(
        session,
        user,
        idle_minutes=settings.session_idle_minutes,
        max_hours=settings.session_max_hours,
    )
    if why is not None:
        session.clear()
        flash(sessions.MESSAGES[why], "info")
        return None
    sessions.touch(session)
    return user


@login_manager.unauthorized_handler
def _unauthorized():
    target = url_for("auth.login", next=request.full_path.rstrip("?"))
    if getattr(request, "htmx", False):
        return "", 401, {"HX-Redirect": target}
    return redirect(target)


def _safe_next(raw: str | None) -> str:
    """Return a same-site path to go to after login, or the dashboard."""
    if not raw or any(c < " " or c == "\x7f" or c == "\\" for c in raw):
        return url_for("dashboard.index")  # a control character or a backslash: not ours
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or not raw.startswith("/") or raw.startswith("//"):
        return url_for("dashboard.index")
    return raw


def _login_form():
    if current_user.is_authenticated:
        return redirect(url_for("dashboard.index"))
    return render_template("login.html", next=request.args.get("next", ""))


def _authenticate(username: str, password: str) -> OperatorUser | None:
    user = accounts.find_user(db.session, username)
    if user is None:
        verify_password(OperatorUser(password_hash=_UNKNOWN_USER_HASH), password)
        return None
    if not verify_password(user, password) or not user.is_active:
        return None
    return user


@bp.route("/login", methods=["GET", "POST"])
def login():
    """The login form; only a POST is a login attempt (a HEAD is a GET, whatever its body)."""
    if request.method != "POST":
        return _login_form()
    username = request.form.get("username", "").strip()
    password = request.form.get("password", "")
    next_path = request.form.get("next", "")
    # A refused login keeps its 401 or 429 (with Retry-After); the page stands for
    # GET /login, so a reload asks for the password again instead of resending it.
    forms.stands_for("auth.login", next=next_path or None)
    throttle = login_throttle()
    address = request.remote_addr or "unknown"  # the client's, behind CONSOLE_TRUSTED_PROXIES
    wait_seconds = throttle.retry_after_seconds(db.session, username, address)
    if wait_seconds > 0:
        headers = {"Retry-After": str(math.ceil(wait_seconds))}
        page = render_template("login.html", error=wait_message(wait_seconds), next=next_path)
        return page, 429, headers
    user = _authenticate(username, password)
    if user is None:
        throttle.record_failure(db.session, username, address)
        db.session.commit()
        error = "Wrong username or password."
        return render_template("login.html", error=error, next=next_path), 401
    throttle.record_success(db.session, username, address)
    session.clear()  # a fresh session (and CSRF token) for the new identity
    login_user(user)
    sessions.start(session, user)
    accounts.mark_logged_in(user, utcnow())
    db.session.commit()
    return redirect(_safe_next(next_path))


@bp.post("/logout")
def logout():
    """End this session and every other session of the account (copied cookies too)."""
    if current_user.is_authenticated:
        accounts.end_sessions(db.session, current_user)
        db.session.commit()
    logout_user()
    session.clear()
    flash("You are logged out.", "info")
    return redirect(url_for("auth.login"))


def init_app(app: Flask) -> None:
    """Register the login pages and the role helpers for templates."""
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please log in to see this page."
    login_manager.login_message_category = "info"
    app.jinja_env.globals["has_role"] = has_role
    app.register_blueprint(bp)
