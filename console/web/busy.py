"""A busy or unreachable database: 503 with Retry-After, fast, instead of a 500 after 30 s.

The console's engine waits at most CONSOLE_DATABASE_LOCK_TIMEOUT_SECONDS for a lock
(SQLite's busy timeout, PostgreSQL's ``lock_timeout``) and a connection gives up
after a connect timeout. What it then raises is answered here: the webhook
endpoints in JSON (the provider delivers again), console pages with the styled
error page. The transaction is rolled back, so nothing changed.
"""

from __future__ import annotations

import logging
import math
import sqlite3

from flask import Flask, jsonify, render_template, request
from sqlalchemy import exc as sa_exc

from console.web.extensions import current_settings, db

log = logging.getLogger(__name__)

# PostgreSQL: lock_not_available, query_canceled (statement/lock timeout), shutting down,
# cannot connect now, too many connections
_BUSY_SQLSTATES = {"55P03", "57014", "57P01", "57P03", "53300"}
_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")
BUSY_MESSAGE = "The database is busy: nothing was changed or recorded; retry in a few seconds."


def is_busy(error: BaseException) -> bool:
    """Whether `error` says the database is locked, overloaded or unreachable (not a bug)."""
    if isinstance(error, sa_exc.TimeoutError):  # no pooled connection came free in time
        return True
    if not isinstance(error, sa_exc.OperationalError):
        return False
    cause = error.orig
    if isinstance(cause, sqlite3.OperationalError):
        return str(cause).startswith(_SQLITE_BUSY)
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:  # psycopg: no connection (refused, timed out, host down)
        return error.connection_invalidated or _is_connection_failure(cause)
    return sqlstate in _BUSY_SQLSTATES or sqlstate.startswith("08")


def _is_connection_failure(cause: BaseException | None) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - PostgreSQL not installed, so not in use
        return False
    return isinstance(cause, psycopg.OperationalError)


def _retry_after_seconds() -> int:
    return max(1, math.ceil(current_settings().db_lock_timeout_seconds))


def answer(code: int, name: str, message: str, headers: dict[str, str] | None = None):
    """An error answer: JSON on the webhook endpoints, the console's error page elsewhere.

    The page is plain text when it cannot be rendered (its header reads the user
    from the database that just failed).
    """
    headers = headers or {}
    if request.blueprint == "webhooks" or request.path.startswith("/webhooks/"):
        return jsonify(error=message), code, headers
    try:
        page = render_template("error.html", code=code, name=name, description=message)
    except sa_exc.SQLAlchemyError:
        db.session.rollback()
        return message, code, {**headers, "Content-Type": "text/plain; charset=utf-8"}
    return page, code, headers


def _answer_busy(error: Exception):
    if not is_busy(error):
        raise error  # a real fault: Flask logs it and answers 500
    db.session.rollback()
    cause = getattr(error, "orig", None) or error
    log.warning(
        "database busy: answered 503",
        extra={"code": 503, "error_type": type(cause).__name__, "target": request.endpoint},
    )
    headers = {"Retry-After": str(_retry_after_seconds())}
    return answer(503, "Service Unavailable", BUSY_MESSAGE, headers)


def init_app(app: Flask) -> None:
    """Answer a busy database with 503 on every route of `app`."""
    app.register_error_handler(sa_exc.OperationalError, _answer_busy)
    app.register_error_handler(sa_exc.TimeoutError, _answer_busy)
