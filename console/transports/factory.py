"""Build the transport that the settings name."""

from __future__ import annotations

from console.config import Settings
from console.transports.base import Transport
from console.transports.smtp import SmtpTransport


def make_transport(settings: Settings) -> Transport:
    """The transport CONSOLE_TRANSPORT names: the SMTP relay or the HTTP provider."""
    if settings.transport == "http":
        from console.transports.http import HttpTransport

        return HttpTransport(
            settings.http_provider_url,
            settings.http_provider_key or "",
            timeout_seconds=settings.smtp_timeout_seconds,
            idempotency_window_seconds=settings.http_idempotency_window_seconds,
        )
    return SmtpTransport(
        settings.smtp_url,
        connections=settings.smtp_connections,
        timeout_seconds=settings.smtp_timeout_seconds,
        ehlo_name=settings.smtp_ehlo_name,
        discard_ehlo_keywords=settings.smtp_discard_ehlo_keywords,
    )
