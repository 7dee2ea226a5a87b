"""The email template catalog: the shipped templates and the application's own.

A template is a folder ``<name>/`` holding ``settings.toml`` (see
``template_settings``), one folder per version (``v1/subject.txt``,
``v1/body.txt``, optional ``v1/body.html``) and ``example.json`` with sample
params. ``CONSOLE_EMAIL_TEMPLATES`` names a second folder of the same layout:
its templates are found beside the shipped ones, and a name in both is the
application's. ``catalog_for(settings)`` loads and checks that catalog once per
process; ``configure(settings)`` makes it the one ``default_catalog()`` returns,
so the worker, the console and ``enqueue`` all render the same templates.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
from pathlib import Path
from typing import Any

import jinja2

from console.config import Settings
from console.mail.template_settings import (
    CatalogError,
    TemplateError,
    TemplateSettings,
    read_template_settings,
)
from console.paths import EMAIL_TEMPLATES_DIR

log = logging.getLogger(__name__)

_SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9-]*)(?:@(?P<version>[0-9]+))?$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_VERSION_FOLDER = re.compile(r"^v(?P<number>[1-9][0-9]*)$")


@dataclasses.dataclass(frozen=True)
class RenderedParts:
    subject: str
    text: str
    html: str | None


def _template_folders(root: Path | None) -> dict[str, Path]:
    if root is None:
        return {}
    return {path.parent.name: path.parent for path in sorted(root.glob("*/settings.toml"))}


class TemplateCatalog:
    """The templates under `root`, and under `application_root` when given (its names win)."""

    def __init__(
        self, root: Path = EMAIL_TEMPLATES_DIR, *, application_root: Path | None = None
    ) -> None:
        self.root = root
        self.application_root = application_root
        shipped = _template_folders(root)
        own = _template_folders(application_root)
        self.overridden = sorted(shipped.keys() & own.keys())
        self._folders = {**shipped, **own}
        loaders = {
            name: jinja2.FileSystemLoader(str(folder)) for name, folder in self._folders.items()
        }
        common = dict(
            loader=jinja2.PrefixLoader(loaders, delimiter="/"),
            undefined=jinja2.StrictUndefined,
            auto_reload=False,
        )
        self._text_env = jinja2.Environment(autoescape=False, keep_trailing_newline=True, **common)
        self._html_env = jinja2.Environment(autoescape=True, **common)

    def folder(self, name: str) -> Path:
        """Return the folder of template `name`; TemplateError when unknown."""
        if name not in self._folders:
            raise TemplateError(f"unknown template {name!r}")
        return self._folders[name]

    @functools.cache  # noqa: B019 - one catalog per folder and process, lives as long as it
    def settings(self, name: str) -> TemplateSettings:
        """Return the settings of template `name`; TemplateError when unknown or invalid."""
        return read_template_settings(self.folder(name) / "settings.toml", name)

    def names(self) -> list[str]:
        """Return the names of every template in the catalog."""
        return sorted(self._folders)

    def resolve(self, spec: str) -> tuple[TemplateSettings, int]:
        """Turn ``"name"`` or ``"name@N"`` into the template's settings and a version."""
        match = _SPEC.match(spec or "")
        if not match:
            raise TemplateError(f"unknown template {spec!r}: expected 'name' or 'name@N'")
        settings = self.settings(match["name"])
        version = int(match["version"]) if match["version"] else settings.current_version
        if not (self.folder(settings.name) / f"v{version}" / "subject.txt").is_file():
            raise TemplateError(f"template {settings.name!r} has no version {version}")
        return settings, version

    @functools.cache  # noqa: B019
    def _compiled(self, name: str, version: int) -> tuple[jinja2.Template, ...]:
        folder = self.folder(name) / f"v{version}"
        try:  # a file is looked up in the folder of the template its path starts with
            subject = self._text_env.get_template(f"{name}/v{version}/subject.txt")
            text = self._text_env.get_template(f"{name}/v{version}/body.txt")
            if not (folder / "body.html").is_file():
                return subject, text
            return subject, text, self._html_env.get_template(f"{name}/v{version}/body.html")
        except jinja2.TemplateNotFound as error:
            raise TemplateError(f"template {name}@{version} has no {error.name}") from None
        except jinja2.TemplateSyntaxError as error:
            where = error.filename or error.name
            raise TemplateError(f"{where}: line {error.lineno}: {error.message}") from None

    def render(self, name: str, version: int, params: dict[str, Any]) -> RenderedParts:
        """Render subject, text and HTML bodies; TemplateError on a missing variable."""
        compiled = self._compiled(name, version)
        try:
            subject = compiled[0].render(params).strip()
            text = compiled[1].render(params)
            html = compiled[2].render(params) if len(compiled) > 2 else None
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {name}@{version}: {exc.message}") from None
        except Exception as exc:  # a template expression failing on these params
            raise TemplateError(f"template {name}@{version}: {type(exc).__name__}: {exc}") from None
        return RenderedParts(subject=subject, text=text, html=html)

    def check(self) -> None:
        """Check every template: settings, versions, and its example rendering; CatalogError."""
        problems = []
        for name in self.names():
            try:
                self._check_one(name)
            except TemplateError as error:
                problems.append(str(error))
        if problems:
            raise CatalogError("\n".join(problems))

    def _check_one(self, name: str) -> None:
        folder = self.folder(name)
        if not _NAME.match(name):
            raise CatalogError(f"{folder}: a template name is lowercase letters, digits and '-'")
        settings = self.settings(name)
        for version_folder in folder.glob("v*/"):
            if (match := _VERSION_FOLDER.match(version_folder.name)) is not None:
                self._compiled(name, int(match["number"]))
        current = folder / f"v{settings.current_version}"
        for required in ("subject.txt", "body.txt"):
            if not (current / required).is_file():
                raise CatalogError(f"{current / required}: missing (current_version is "
                                   f"{settings.current_version})")  # fmt: skip
        example = folder / "example.json"
        if not example.is_file():
            raise CatalogError(
                f"{example}: missing (the sample params every template is checked with)"
            )
        try:
            params = json.loads(example.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise CatalogError(f"{example}: cannot be read as JSON: {error}") from None
        if not isinstance(params, dict):
            raise CatalogError(f"{example}: must hold one JSON object of template params")
        try:
            self.render(name, settings.current_version, params)
        except TemplateError as error:
            raise CatalogError(f"{example}: these params do not render: {error}") from None


@functools.cache
def _checked_catalog(application_root: Path | None) -> TemplateCatalog:
    catalog = TemplateCatalog(application_root=application_root)
    catalog.check()
    for name in catalog.overridden:
        log.info(
            "email template %s from CONSOLE_EMAIL_TEMPLATES replaces the shipped one",
            name,
            extra={"template": name},
        )
    return catalog


def catalog_for(settings: Settings) -> TemplateCatalog:
    """Return the checked catalog `settings` name, built once; CatalogError names a bad file."""
    return _checked_catalog(settings.email_templates_dir)


_configured: TemplateCatalog | None = None


def configure(settings: Settings) -> TemplateCatalog:
    """Check the catalog of `settings` and make it the process's default; return it."""
    global _configured
    _configured = catalog_for(settings)
    return _configured


def default_catalog() -> TemplateCatalog:
    """Return the configured catalog, or the shipped templates alone before configure()."""
    return _configured if _configured is not None else _shipped_catalog()


@functools.cache
def _shipped_catalog() -> TemplateCatalog:
    return TemplateCatalog()
