"""Structured logs: one JSON object a line, opaque ids only, secrets redacted.

A log call names its facts as ``extra`` fields::

    log.info("attempt finished", extra={"intent_id": 7, "attempt_id": 31, "outcome": "accepted"})

Only the fields in ``LOGGED_FIELDS`` reach the output — ids, stages, codes and
decisions, never a recipient, a body or template params — and every string that
is written passes through the redactor, which removes credentials: the password
of any URL (``smtp://user:secret@host``), ``password=...`` pairs, and each
secret registered from the settings (SMTP password, secret key, webhook URL).

Database errors carry data of the row they failed on: SQLAlchemy's
``[parameters: ...]`` (engines are also created with ``hide_parameters=True``),
PostgreSQL's ``DETAIL:`` line (``Failing row contains (...)``, ``Key (...)=(...)``)
and the value quoted in "invalid input syntax" errors. The redactor removes
each, so a traceback never writes a recipient, a payload or an operator's reason.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from typing import IO, Any
from urllib.parse import urlsplit

REDACTED = "[redacted]"

# Facts a log line may carry besides its message: opaque ids, stages, outcomes.
LOGGED_FIELDS = frozenset(
    {
        "intent_id",
        "attempt_id",
        "attempt_number",
        "provider_message_id",
        "message_id",
        "worker_id",
        "lane",
        "template",
        "status",
        "stage",
        "outcome",
        "code",
        "enhanced_status",
        "error_type",
        "decision",
        "retry_in_seconds",
        "duration_ms",
        "count",
        "batch_size",
        "recipient_domain",
        "condition",
        "target",
        "breaker_state",
        "failure_rate",
        "elapsed_ms",
    }
)

_URL_PASSWORD = re.compile(
    r"(?P<head>[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<secret>[^\s@/]+)(?=@)", re.I
)
_KEY_VALUE_SECRET = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|secret|token|api[_-]?key)\b\s*[=:]\s*)(?P<secret>[^\s&,;'\"]+)",
    re.I,
)
_MIN_SECRET_LENGTH = 4

# What a database error quotes from the row or the statement's parameters.
_END_OF_ERROR = r"(?=\n\(Background on this error|\n\nThe above exception|\n\nDuring handling|\Z)"
_SQL_PARAMETERS = re.compile(r"\[parameters: .*?" + _END_OF_ERROR, re.S)
_DETAIL_LINE = re.compile(r"^(?P<head>\s*DETAIL:\s*).*$", re.M)
_QUOTED_INPUT = re.compile(r'(?P<head>invalid input (?:syntax|value) for [^:\n]*:\s*)"[^"\n]*"')
ROW_DATA_REDACTED = "[row data redacted]"


def scrub_database_errors(text: str) -> str:
    """Remove the parameters and row values a database error message quotes."""
    if "[parameters: " in text:
        text = _SQL_PARAMETERS.sub("[parameters: " + ROW_DATA_REDACTED + "]", text)
    if "DETAIL:" in text:
        text = _DETAIL_LINE.sub(lambda m: m["head"] + ROW_DATA_REDACTED, text)
    return _QUOTED_INPUT.sub(lambda m: m["head"] + ROW_DATA_REDACTED, text)


class Redactor:
    """Remove credentials and registered secrets from text."""

    def __init__(self) -> None:
        self._secrets: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def register(self, *secrets: str | None) -> None:
        """Never write any of `secrets` (short or empty values are ignored)."""
        fresh = {s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH}
        with self._lock:
            merged = set(self._secrets) | fresh
            self._secrets = tuple(sorted(merged, key=len, reverse=True))

    def redact(self, text: str) -> str:
        """Return `text` without any credential the redactor knows how to spot."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED, text)
        text = _KEY_VALUE_SECRET.sub(lambda m: m["head"] + REDACTED, text)
        return scrub_database_errors(text)


redactor = Redactor()


def url_secrets(url: str | None) -> list[str]:
    """Return the password of `url` as a one-item list, or an empty list."""
    if not url:
        return []
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [password] if password else []


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return redactor.redact(str(value))


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object: time, level, logger, message, known fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redactor.redact(record.getMessage()),
        }
        for field in LOGGED_FIELDS.intersection(record.__dict__):
            entry[field] = _json_safe(record.__dict__[field])
        if record.exc_info:
            entry["exc"] = redactor.redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False, sort_keys=False)


# The facts a readable line adds after its message: what the message does not name itself.
READABLE_FIELDS = (
    "recipient_domain",
    "lane",
    "template",
    "condition",
    "breaker_state",
    "code",
    "count",
    "error_type",
)


class ReadableFormatter(logging.Formatter):
    """Format a record for a person at a terminal: ``19:13:02 warning message  name=value``.

    The same redaction as the JSON lines; the level written in full.
    """

    def format(self, record: logging.LogRecord) -> str:
        message = redactor.redact(record.getMessage())
        at = dt.datetime.fromtimestamp(record.created, dt.UTC)
        line = f"{at:%H:%M:%S} {record.levelname.lower():<8}{message}"
        facts = [
            f"{name}={_json_safe(record.__dict__[name])}"
            for name in READABLE_FIELDS
            if record.__dict__.get(name) is not None and f"{name}=" not in message
        ]
        if facts:
            line += "  " + " ".join(facts)
        if record.exc_info:
            line += "\n" + redactor.redact(self.formatException(record.exc_info))
        return line


class _ConsoleHandler(logging.StreamHandler):
    """The product's own handler, so configure_logging() can find and replace it."""


def _level_from(level: int | str) -> int:
    if isinstance(level, int):
        return level
    resolved = logging.getLevelName(level.strip().upper())
    if not isinstance(resolved, int):
        raise ValueError(f"the log level must be a name like INFO or DEBUG, got {level!r}")
    return resolved


def configure_logging(
    *,
    secrets: Iterable[str | None] = (),
    level: int | str = "INFO",
    stream: IO[str] | None = None,
    readable: bool = False,
) -> logging.Handler:
    """Send every log record to `stream` (stderr) as JSON lines; return the handler.

    Safe to call more than once: the product's handler is replaced, other
    handlers (a test's capture, a host's own) are left alone. `secrets` are
    added to the redactor; the console passes ``settings.log_level``
    (CONSOLE_LOG_LEVEL, read in ``console.config`` like every setting).
    `readable`: lines for a person at a terminal (``ReadableFormatter``) instead.
    """
    resolved_level = _level_from(level)
    redactor.register(*secrets)
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ConsoleHandler)]:
        root.removeHandler(handler)
    handler = _ConsoleHandler(stream or sys.stderr)
    handler.setFormatter(ReadableFormatter() if readable else JsonFormatter())
    root.addHandler(handler)
    root.setLevel(resolved_level)
    for noisy in ("werkzeug", "waitress.queue", "apscheduler", "httpx", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler


def product_logging_configured() -> bool:
    """Whether configure_logging() set up this process (the migrations then leave logging be)."""
    return any(isinstance(handler, _ConsoleHandler) for handler in logging.getLogger().handlers)


# Settings fields that hold a secret as a whole, and those that are URLs with one.
SECRET_FIELDS = ("secret_key", "http_provider_key", "webhook_secret", "alert_webhook_url")
URL_FIELDS = ("smtp_url", "database_url")


def settings_secrets(settings: Any) -> list[str]:
    """Return every secret held by `settings` that must never be logged."""
    found = [getattr(settings, name, None) for name in SECRET_FIELDS]
    for name in URL_FIELDS:
        found += url_secrets(getattr(settings, name, None))
    return [s for s in found if isinstance(s, str) and s]
