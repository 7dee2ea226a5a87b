"""One setting's text parsed and checked, the error naming the variable. Pure: no IO but
``Path.is_dir`` for a directory setting.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A setting is invalid; the message names the variable."""


def positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ConfigError(f"{name} must be at least 1, got {value}")
    return value


def hop_count(name: str, raw: str) -> int:
    return 0 if raw.strip() == "0" else positive_int(name, raw.strip())


def non_negative_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0 or value != value:
        raise ConfigError(f"{name} must not be negative, got {raw!r}")
    return value


def positive_float(name: str, raw: str) -> float:
    value = non_negative_float(name, raw)
    if value == 0:
        raise ConfigError(f"{name} must be greater than 0, got {raw!r}")
    return value


def boolean(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be 1/0, true/false, yes/no or on/off, got {raw!r}")


def string(name: str, raw: str) -> str:
    if not raw.strip():
        raise ConfigError(f"{name} must not be empty")
    return raw.strip()


def database_url(name: str, raw: str) -> str:
    scheme = urlsplit(raw).scheme
    if scheme.split("+")[0] not in ("sqlite", "postgresql", "postgres"):
        raise ConfigError(f"{name} must be a sqlite:// or postgresql:// URL, got scheme {scheme!r}")
    return normalized_database_url(raw)


def normalized_database_url(url: str) -> str:
    """`url` with ``postgres://`` and ``postgresql://`` read as PostgreSQL through psycopg."""
    scheme, separator, rest = url.partition("://")
    dialect, _, driver = scheme.partition("+")
    if separator and dialect in ("postgres", "postgresql"):
        return f"postgresql+{driver or 'psycopg'}://{rest}"
    return url


def smtp_url(name: str, raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("smtp", "smtps"):
        raise ConfigError(f"{name} must start with smtp:// or smtps://, got {raw.split(':')[0]!r}")
    if not parts.hostname:
        raise ConfigError(f"{name} must name a host, e.g. smtp://127.0.0.1:1025")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ConfigError(f"{name} has an invalid port") from None
    return raw


def domain(name: str, raw: str) -> str:
    value = string(name, raw)
    if any(c in value for c in "<>@ \r\n\t") or "." not in value:
        raise ConfigError(f"{name} must be a domain name like mail.example.com, got {raw!r}")
    return value


def mailbox(name: str, raw: str) -> str:
    value = string(name, raw)
    if "\r" in value or "\n" in value or "@" not in value:
        raise ConfigError(f"{name} must be an address like 'Shop <noreply@example.com>'")
    return value


def transport(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("smtp", "http"):
        raise ConfigError(f"{name} must be smtp or http, got {raw!r}")
    return value


def http_url(name: str, raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must be an http(s):// URL, e.g. https://api.resend.com")
    return raw.strip().rstrip("/")


def secure_http_url(name: str, raw: str) -> str:
    """An https:// URL, or http:// to a loopback host (the key travels in it)."""
    url = http_url(name, raw)
    parts = urlsplit(url)
    if parts.scheme != "https" and not _loopback(parts.hostname or ""):
        raise ConfigError(
            f"{name} must be an https:// URL unless its host is loopback "
            f"(127.0.0.0/8, ::1, localhost), got {raw.strip()!r}"
        )
    return url


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def comma_list(name: str, raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def fraction(name: str, raw: str) -> float:
    value = positive_float(name, raw)
    if value > 1:
        raise ConfigError(f"{name} must be a fraction between 0 and 1, got {raw!r}")
    return value


def directory(name: str, raw: str) -> Path:
    path = Path(raw.strip()).expanduser()
    if not path.is_dir():
        problem = "is not a directory" if path.exists() else "does not exist"
        raise ConfigError(f"{name} must be an existing directory: {str(path)!r} {problem}")
    return path.resolve()


def log_level(name: str, raw: str) -> str:
    value = raw.strip().upper()
    if not isinstance(logging.getLevelName(value), int):
        raise ConfigError(f"{name} must be a level like INFO or DEBUG, got {raw!r}")
    return value


# The relay's EHLO keywords the worker acts on per message; any of them may be discarded.
DISCARDABLE_EHLO_KEYWORDS = ("size", "8bitmime", "smtputf8", "pipelining", "chunking")


def ehlo_keywords(name: str, raw: str) -> frozenset[str]:
    """Keywords separated by commas or spaces, in any case; only DISCARDABLE_EHLO_KEYWORDS."""
    keywords = frozenset(raw.replace(",", " ").lower().split())
    unknown = sorted(keywords - set(DISCARDABLE_EHLO_KEYWORDS))
    if unknown:
        allowed = ", ".join(DISCARDABLE_EHLO_KEYWORDS)
        raise ConfigError(f"{name} may name only {allowed}; not {', '.join(unknown)}")
    return keywords
