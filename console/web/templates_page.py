"""The email templates page: every template with its versions and settings; previews.

The list is for everyone who logs in; a template's preview, rendered from its
`example.json` as the worker would render it, is for operators. No SQL: the
catalog is the files the process loaded (shipped and CONSOLE_EMAIL_TEMPLATES).
"""

from __future__ import annotations

import dataclasses
import json
import re

from flask import Blueprint, Flask, abort, render_template, request

from console.core.whole_numbers import whole_number
from console.mail.catalog import TemplateCatalog, catalog_for
from console.mail.template_settings import TemplateError, TemplateSettings
from console.vocabulary import OPERATOR, VIEWER
from console.web.auth import role_required
from console.web.extensions import current_settings

bp = Blueprint("templates_page", __name__, url_prefix="/templates")

_VERSION_FOLDER = re.compile(r"^v([1-9][0-9]{0,5})$")
SHIPPED = "shipped"
APPLICATION = "application"


@dataclasses.dataclass(frozen=True)
class TemplateEntry:
    settings: TemplateSettings
    versions: list[int]
    source: str  # SHIPPED or APPLICATION
    replaces_shipped: bool = False
    problem: str | None = None  # a template whose settings cannot be read


def _catalog() -> TemplateCatalog:
    return catalog_for(current_settings())


def _versions(catalog: TemplateCatalog, name: str) -> list[int]:
    """The versions of a template: its folders v1, v2, ... that hold a subject."""
    found = []
    for folder in catalog.folder(name).iterdir():
        match = _VERSION_FOLDER.match(folder.name)
        if match and (folder / "subject.txt").is_file():
            found.append(int(match[1]))
    return sorted(found)


def _entry(catalog: TemplateCatalog, name: str) -> TemplateEntry:
    folder = catalog.folder(name)
    own = catalog.application_root is not None and folder.parent == catalog.application_root
    return TemplateEntry(
        settings=catalog.settings(name),
        versions=_versions(catalog, name),
        source=APPLICATION if own else SHIPPED,
        replaces_shipped=own and name in catalog.overridden,
    )


@bp.get("")
@role_required(VIEWER)
def index():
    """List every template: versions, lane, ambiguity policy, max age, where it comes from."""
    catalog = _catalog()
    entries = [_entry(catalog, name) for name in catalog.names()]
    return render_template("templates/index.html", entries=entries)


@bp.get("/<name>")
@role_required(OPERATOR)
def detail(name: str):
    """Show one template and its preview, for the current version or `?version=N`."""
    catalog = _catalog()
    if name not in catalog.names():
        abort(404, description=f"There is no email template {name!r}.")
    entry = _entry(catalog, name)
    raw_version = request.args.get("version", "")
    version = entry.settings.current_version
    if raw_version:
        asked = whole_number(raw_version)
        if asked not in entry.versions:
            abort(404, description=f"The template {name} has no version {raw_version[:20]!r}.")
        version = asked
    example, preview = _example_preview(catalog, name, version)
    return render_template(
        "templates/detail.html", entry=entry, version=version, example=example, preview=preview
    )


def _example_preview(catalog: TemplateCatalog, name: str, version: int) -> tuple[str, dict]:
    """The example params as shown, and the parts they render to (or the error)."""
    path = catalog.folder(name) / "example.json"
    try:
        params = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return "", {"error": f"example.json cannot be read: {exc}"}
    shown = json.dumps(params, indent=2, ensure_ascii=False)
    try:
        parts = catalog.render(name, version, params)
    except TemplateError as exc:
        return shown, {"error": f"The example does not render with v{version}: {exc}"}
    return shown, {"subject": parts.subject, "text": parts.text, "html": parts.html}


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
