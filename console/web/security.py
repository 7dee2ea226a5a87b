"""CSRF tokens, security headers and login throttling for the console."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Flask, abort, current_app, render_template, request, session
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from werkzeug.exceptions import HTTPException

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRFToken"
_SESSION_KEY = "_csrf_token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_EXEMPT_ATTRIBUTE = "_csrf_exempt"
MAX_TRACKED_KEYS = 10_000

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


def _error_page(error: HTTPException):
    """Answer a browser with a readable page; anything else with the plain error."""
    if _is_exempt() or not request.accept_mimetypes.accept_html:
        return error
    page = render_template(
        "error.html", code=error.code, name=error.name, description=error.description
    )
    return page, error.code


class LoginThrottle:
    """Count failed logins per account and per address in a sliding window.

    Once either count reaches its limit, further attempts are refused until the
    oldest failure leaves the window. The counts live in this process's memory.
    """

    def __init__(
        self,
        *,
        max_failures_per_account: int = 5,
        max_failures_per_address: int = 20,
        window_seconds: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures_per_account = max_failures_per_account
        self.max_failures_per_address = max_failures_per_address
        self.window_seconds = window_seconds
        self._clock = clock
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        failures = self._failures.get(key, deque())
        while failures and failures[0] <= now - self.window_seconds:
            failures.popleft()
        if not failures:
            self._failures.pop(key, None)
        return failures

    def retry_after_seconds(self, username: str, address: str) -> float:
        """Return 0 when a login may be tried now, else how long to wait."""
        now = self._clock()
        checks = (
            (("account", username.strip().lower()), self.max_failures_per_account),
            (("address", address), self.max_failures_per_address),
        )
        wait = 0.0
        with self._lock:
            for key, limit in checks:
                failures = self._recent(key, now)
                if len(failures) >= limit:
                    wait = max(wait, failures[-limit] + self.window_seconds - now)
        return wait

    def record_failure(self, username: str, address: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) > MAX_TRACKED_KEYS:
                for key in list(self._failures):
                    self._recent(key, now)
            for key in (("account", username.strip().lower()), ("address", address)):
                self._failures.setdefault(key, deque()).append(now)
                self._recent(key, now)

    def record_success(self, username: str) -> None:
        """Forget the account's failures (the address keeps its count)."""
        with self._lock:
            self._failures.pop(("account", username.strip().lower()), None)


def login_throttle() -> LoginThrottle:
    return current_app.extensions["console.login_throttle"]


def init_app(app: Flask) -> None:
    """Install CSRF checking, security headers and the login throttle on `app`."""
    app.extensions.setdefault("console.login_throttle", LoginThrottle())
    app.before_request(_check_csrf)
    app.after_request(_add_security_headers)
    app.jinja_env.globals["csrf_token"] = csrf_token
    for code in (400, 403, 404, 405):
        app.register_error_handler(code, _error_page)
