"""Email messages built from the catalog's rendering, with the intent's stored identity.

The catalog itself (lookup by name and version, rendering, the application's own
templates) is in ``console.mail.catalog``.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any

from console.core.clock import utcnow
from console.mail.catalog import RenderedParts, TemplateCatalog, default_catalog


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
