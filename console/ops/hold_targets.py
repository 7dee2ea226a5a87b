"""What a hold may name, checked against the template catalog (the holds page, ``console hold``)."""

from __future__ import annotations

from console.mail.catalog import TemplateCatalog
from console.mail.template_settings import TemplateError
from console.state_tables import HOLD_TEMPLATE
from console.store import holds


def known_selector(kind: str, text: str, catalog: TemplateCatalog) -> holds.Selector:
    """Parse a selector and check its template is in `catalog`; UnknownTarget if not."""
    selector = holds.Selector.parse(kind, text)
    if selector.kind == HOLD_TEMPLATE:
        try:
            catalog.resolve(selector.spec)
        except TemplateError as exc:
            raise holds.UnknownTarget("template_unknown", problem=str(exc)) from None
    return selector


def max_ages(catalog: TemplateCatalog) -> dict[str, float]:
    """Each template's max age in seconds, for those that have one."""
    ages = {name: catalog.settings(name).max_age_seconds for name in catalog.names()}
    return {name: age for name, age in ages.items() if age is not None}
