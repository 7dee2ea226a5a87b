"""A template's ``settings.toml``: read, checked, and every problem named with its file.

::

    current_version = 1
    lane = "bulk"                      # or "critical"
    ambiguity = "hold"                 # or "resend"
    max_age_seconds = 1800             # optional: older mail expires unsent
    pending_age_target_seconds = 600   # optional: alert when pending mail is older
    latency_target_seconds = 30        # optional: p99 enqueue -> accepted target (else the lane's)
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from console.config import ConfigError
from console.vocabulary import AMBIGUITY_POLICIES, HOLD, LANES

KNOWN_KEYS = frozenset(
    {"current_version", "lane", "ambiguity", "max_age_seconds", "pending_age_target_seconds",
     "latency_target_seconds"}
)  # fmt: skip


class TemplateError(ValueError):
    """A template name, version or its files are wrong, or rendering failed."""


class CatalogError(ConfigError, TemplateError):
    """A template folder is invalid: start-up and enqueue stop; the message names the file."""


@dataclasses.dataclass(frozen=True)
class TemplateSettings:
    name: str
    current_version: int
    lane: str
    ambiguity_policy: str = HOLD
    max_age_seconds: float | None = None
    pending_age_target_seconds: float | None = None
    latency_target_seconds: float | None = None


def _positive_seconds(raw: dict[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{key} must be a number of seconds above 0, got {value!r}")
    return value


def _settings_from(name: str, raw: dict[str, Any]) -> TemplateSettings:
    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}: expected {', '.join(sorted(KNOWN_KEYS))}")
    version = raw.get("current_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"current_version must be a whole number of at least 1, got {version!r}")
    lane = raw.get("lane", "bulk")
    if lane not in LANES:
        raise ValueError(f"lane must be one of {', '.join(LANES)}, got {lane!r}")
    policy = raw.get("ambiguity", "hold")
    if policy not in AMBIGUITY_POLICIES:
        raise ValueError(
            f"ambiguity must be one of {', '.join(AMBIGUITY_POLICIES)}, got {policy!r}"
        )
    return TemplateSettings(
        name=name,
        current_version=version,
        lane=lane,
        ambiguity_policy=policy,
        max_age_seconds=_positive_seconds(raw, "max_age_seconds"),
        pending_age_target_seconds=_positive_seconds(raw, "pending_age_target_seconds"),
        latency_target_seconds=_positive_seconds(raw, "latency_target_seconds"),
    )


def read_template_settings(path: Path, name: str) -> TemplateSettings:
    """Read and check the settings file of template `name`; CatalogError names the file."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CatalogError(f"{path}: cannot be read as TOML: {error}") from None
    try:
        return _settings_from(name, raw)
    except ValueError as error:
        raise CatalogError(f"{path}: {error}") from None
