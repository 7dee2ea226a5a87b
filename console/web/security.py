"""CSRF tokens, signed tokens and security headers for the console."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any

from flask import (
    Blueprint,
    Flask,
    abort,
    current_app,
    jsonify,
    render_template,
    request,
    session,
)
from flask_login import current_user
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from werkzeug.exceptions import HTTPException

from console.web.extensions import db

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRFToken"
_SESSION_KEY = "_csrf_token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_EXEMPT_ATTRIBUTE = "_csrf_exempt"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
HSTS = "max-age=31536000"
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def csrf_token() -> str:
    """Return this session's CSRF token, creating it on first use."""
    token = session.get(_SESSION_KEY)
    if not token:
        token = secrets.token_urlsafe(32)
        session[_SESSION_KEY] = token
    return token


class TokenRefused(ValueError):
    """A signed token that is forged, altered or too old; the message says which."""


def signed_token(payload: Any, purpose: str) -> str:
    """Sign `payload` (JSON-serializable) with the session key, for `purpose` only."""
    return URLSafeTimedSerializer(current_app.secret_key, salt=purpose).dumps(payload)


def read_signed_token(token: str, purpose: str, max_age_seconds: float) -> Any:
    """Return the payload of a token ``signed_token`` made for `purpose`; TokenRefused if not."""
    serializer = URLSafeTimedSerializer(current_app.secret_key, salt=purpose)
    try:
        return serializer.loads(token, max_age=max_age_seconds)
    except SignatureExpired as exc:
        raise TokenRefused(f"older than {max_age_seconds / 60:.0f} minutes") from exc
    except BadSignature as exc:
        raise TokenRefused("not one this console issued") from exc


def csrf_exempt(target: Callable | Blueprint) -> Callable | Blueprint:
    """Mark a view or a whole blueprint (e.g. signed provider webhooks) as CSRF-free."""
    setattr(target, _EXEMPT_ATTRIBUTE, True)
    return target


def _is_exempt() -> bool:
    view = current_app.view_functions.get(request.endpoint or "")
    if view is not None and getattr(view, _EXEMPT_ATTRIBUTE, False):
        return True
    blueprint = current_app.blueprints.get(request.blueprint or "")
    return blueprint is not None and getattr(blueprint, _EXEMPT_ATTRIBUTE, False)


def _check_csrf() -> None:
    """Refuse (400) a state-changing request whose token does not match the session's."""
    if request.method in _SAFE_METHODS or _is_exempt():
        return
    expected = session.get(_SESSION_KEY)
    sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    if not expected or not hmac.compare_digest(str(expected), sent):
        abort(400, description="The form has expired or did not come from this console.")


def _add_security_headers(response):
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "static":
        response.headers.setdefault("Cache-Control", "no-store")
    if request.is_secure:  # HTTPS here, or at a trusted proxy (CONSOLE_TRUSTED_PROXIES)
        response.headers.setdefault("Strict-Transport-Security", HSTS)
    return response


_WANTS_JSON_PREFIXES = ("/webhooks/", "/metrics")
_TITLES = {409: "Changed meanwhile", 500: "Something went wrong"}
_CONFLICT = (
    "This changed meanwhile (another operator, or the worker, got there first), so nothing"
    " was done. Reload the page to see its current state, then try again if still needed."
)
_FAULT = (
    "The console hit an error it did not expect; nothing more was done and the error was"
    " logged with its details. Try again; if it keeps happening, tell whoever runs the console."
)


def _wants_json() -> bool:
    path = request.path
    return path == "/metrics" or path.startswith(_WANTS_JSON_PREFIXES) or _is_exempt()


def _role_needed() -> str | None:
    """The least role the refused view asks for, read from its role_required wrapper."""
    seen: set[int] = set()
    todo = [current_app.view_functions.get(request.endpoint or "")]
    while todo:
        func = todo.pop()
        if func is None or id(func) in seen or len(seen) > 20:
            continue
        seen.add(id(func))
        cells = dict(zip(func.__code__.co_freevars, func.__closure__ or (), strict=False))
        if "minimum" in cells and isinstance(cells["minimum"].cell_contents, str):
            return cells["minimum"].cell_contents
        todo.extend(c.cell_contents for c in cells.values() if callable(c.cell_contents))
        todo.append(getattr(func, "__wrapped__", None))
    return None


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _description(error: HTTPException) -> str:
    """What the page says: the view's own message, or what is needed to get further."""
    own = error.description if error.description != type(error).description else None
    code = error.code
    if code == 403:
        needed = _role_needed()
        you = getattr(current_user, "role", None) if current_user.is_authenticated else None
        if needed and you:
            lead = f"This needs the {needed} role; you are {_article(you)}."
            return f"{lead} {own} Ask an admin." if own else f"{lead} Ask an admin for it."
        return own or "Your account may not do this. Ask an admin for the role it needs."
    if code == 404:
        return own or f"There is nothing at {request.path[:200]}. Check the address, or start over."
    if code == 409:
        return own or _CONFLICT
    if code == 500:
        return _FAULT
    return own or error.description or ""


def _error_page(error: HTTPException):
    """Answer a browser with a styled page that says what is needed; JSON on machine routes."""
    code = error.code or 500
    if _wants_json():
        message = error.description if code != 500 else "internal error; it was logged"
        return jsonify(error=message), code
    if not request.accept_mimetypes.accept_html:
        return error
    description = _description(error)
    name = _TITLES.get(code, error.name)
    try:
        if code == 500:
            db.session.rollback()  # the failed request's transaction, before the layout reads
        page = render_template("error.html", code=code, name=name, description=description)
    except Exception:  # the layout itself failed (e.g. the database): plain text
        return description, code, {"Content-Type": "text/plain; charset=utf-8"}
    return page, code


def init_app(app: Flask) -> None:
    """Install CSRF checking and security headers on `app`."""
    app.before_request(_check_csrf)
    app.after_request(_add_security_headers)
    app.jinja_env.globals["csrf_token"] = csrf_token
    for code in (400, 403, 404, 405, 409, 500):
        app.register_error_handler(code, _error_page)
