"""Email templates: lookup by name and version, rendering, and message building.

A template lives in ``templates/email/<name>/``: a ``settings.toml`` (current
version, lane, ambiguity policy, optional max age) and one folder per version
(``v1/``) holding ``subject.txt``, ``body.txt`` and optionally ``body.html``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import jinja2

from console.models import utcnow
from console.paths import EMAIL_TEMPLATES_DIR
from console.vocabulary import LANES

AMBIGUITY_POLICIES = ("hold", "resend")
_SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9-]*)(?:@(?P<version>[0-9]+))?$")


class TemplateError(ValueError):
    """A template name, version or its files are wrong, or rendering failed."""


@dataclasses.dataclass(frozen=True)
class TemplateSettings:
    name: str
    current_version: int
    lane: str
    ambiguity_policy: str = "hold"
    max_age_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class RenderedParts:
    subject: str
    text: str
    html: str | None


class TemplateCatalog:
    """The email templates found under one folder, loaded once and cached."""

    def __init__(self, root: Path = EMAIL_TEMPLATES_DIR) -> None:
        self.root = root
        loader = jinja2.FileSystemLoader(str(root))
        common = dict(loader=loader, undefined=jinja2.StrictUndefined, auto_reload=False)
        self._text_env = jinja2.Environment(autoescape=False, keep_trailing_newline=True, **common)
        self._html_env = jinja2.Environment(autoescape=True, **common)

    @functools.cache  # noqa: B019 - one catalog per process, lives as long as it
    def settings(self, name: str) -> TemplateSettings:
        """Return the settings of template `name`; TemplateError when unknown."""
        path = self.root / name / "settings.toml"
        if not _SPEC.match(name) or not path.is_file():
            raise TemplateError(f"unknown template {name!r}")
        raw = tomllib.loads(path.read_text())
        settings = TemplateSettings(
            name=name,
            current_version=int(raw["current_version"]),
            lane=raw.get("lane", "bulk"),
            ambiguity_policy=raw.get("ambiguity", "hold"),
            max_age_seconds=raw.get("max_age_seconds"),
        )
        if settings.lane not in LANES or settings.ambiguity_policy not in AMBIGUITY_POLICIES:
            raise TemplateError(f"template {name!r} has an invalid lane or ambiguity policy")
        return settings

    def names(self) -> list[str]:
        """Return the names of every template in the catalog."""
        return sorted(p.parent.name for p in self.root.glob("*/settings.toml"))

    def resolve(self, spec: str) -> tuple[TemplateSettings, int]:
        """Turn ``"name"`` or ``"name@N"`` into the template's settings and a version."""
        match = _SPEC.match(spec or "")
        if not match:
            raise TemplateError(f"unknown template {spec!r}: expected 'name' or 'name@N'")
        settings = self.settings(match["name"])
        version = int(match["version"]) if match["version"] else settings.current_version
        if not (self.root / settings.name / f"v{version}" / "subject.txt").is_file():
            raise TemplateError(f"template {settings.name!r} has no version {version}")
        return settings, version

    @functools.cache  # noqa: B019
    def _compiled(self, name: str, version: int) -> tuple[jinja2.Template, ...]:
        folder = f"{name}/v{version}"
        subject = self._text_env.get_template(f"{folder}/subject.txt")
        text = self._text_env.get_template(f"{folder}/body.txt")
        html_path = self.root / name / f"v{version}" / "body.html"
        if html_path.is_file():
            return subject, text, self._html_env.get_template(f"{folder}/body.html")
        return subject, text

    def render(self, name: str, version: int, params: dict[str, Any]) -> RenderedParts:
        """Render subject, text and HTML bodies; TemplateError on a missing variable."""
        compiled = self._compiled(name, version)
        try:
            subject = compiled[0].render(params).strip()
            text = compiled[1].render(params)
            html = compiled[2].render(params) if len(compiled) > 2 else None
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {name}@{version}: {exc.message}") from None
        return RenderedParts(subject=subject, text=text, html=html)


@functools.cache
def default_catalog() -> TemplateCatalog:
    """Return the catalog of the shipped templates folder."""
    return TemplateCatalog()


def build_message(
    intent: Any,
    *,
    mail_from: str,
    catalog: TemplateCatalog | None = None,
    parts: RenderedParts | None = None,
) -> EmailMessage:
    """Build the standards-compliant message of `intent` with its stored Message-ID."""
    catalog = catalog or default_catalog()
    parts = parts or catalog.render(intent.template, intent.template_version, intent.params or {})
    message = EmailMessage()
    message["From"] = mail_from
    message["To"] = intent.recipient
    message["Subject"] = parts.subject
    message["Date"] = format_datetime(utcnow())
    message["Message-ID"] = intent.message_id
    message.set_content(parts.text)
    if parts.html is not None:
        message.add_alternative(parts.html, subtype="html")
    return message
