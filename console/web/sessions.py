"""Server-side validity of a login session, checked on every request that loads the user.

The signed session cookie carries three stamps, set at login:

- ``_gen``: the account's ``session_generation`` then. Logout, "log out everywhere
  else", a new password, a role change and a deactivation raise the stored one,
  so every cookie issued before — copied, stolen or left in another browser —
  is refused from the next request on;
- ``_login_at``: the session ends CONSOLE_SESSION_MAX_HOURS after it, in use or not;
- ``_seen_at``: the last request; the session ends after CONSOLE_SESSION_IDLE_MINUTES
  without one.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

from console.models import OperatorUser

GENERATION_KEY = "_gen"
LOGIN_AT_KEY = "_login_at"
SEEN_AT_KEY = "_seen_at"
# _seen_at is rewritten at most this often, so a busy page does not re-sign the cookie each time
SEEN_AT_RESOLUTION_SECONDS = 30


def start(session: MutableMapping[str, Any], user: OperatorUser, now: float | None = None) -> None:
    """Stamp a fresh login session of `user`."""
    now = time.time() if now is None else now
    session[GENERATION_KEY] = user.session_generation
    session[LOGIN_AT_KEY] = now
    session[SEEN_AT_KEY] = now


def keep_after_change(session: MutableMapping[str, Any], generation: int) -> None:
    """Keep this session alive across a generation raise it asked for itself."""
    session[GENERATION_KEY] = generation


def refusal(
    session: MutableMapping[str, Any],
    user: OperatorUser,
    *,
    idle_minutes: float,
    max_hours: float,
    now: float | None = None,
) -> str | None:
    """Why this session may no longer act as `user`, or None while it may."""
    now = time.time() if now is None else now
    generation = session.get(GENERATION_KEY)
    login_at, seen_at = session.get(LOGIN_AT_KEY), session.get(SEEN_AT_KEY)
    if not isinstance(generation, int) or generation != user.session_generation:
        return "ended"
    if not isinstance(login_at, int | float) or not isinstance(seen_at, int | float):
        return "ended"
    if now - login_at > max_hours * 3600:
        return "expired"
    if now - seen_at > idle_minutes * 60:
        return "idle"
    return None


def touch(session: MutableMapping[str, Any], now: float | None = None) -> None:
    """Record that this session made a request now."""
    now = time.time() if now is None else now
    if now - session.get(SEEN_AT_KEY, 0) >= SEEN_AT_RESOLUTION_SECONDS:
        session[SEEN_AT_KEY] = now


MESSAGES = {
    "ended": "Your session has ended. Please log in again.",
    "expired": "Your session has reached its maximum age. Please log in again.",
    "idle": "You were logged out after a time without activity. Please log in again.",
}
