"""Build the transport the settings ask for: ``CONSOLE_TRANSPORT=smtp`` (default) or ``http``."""

from __future__ import annotations

from console.config import Settings
from console.transports.base import Transport


def make_transport(settings: Settings) -> Transport:
    """Return an SMTP transport for CONSOLE_SMTP_URL or an HTTP one for the provider API."""
    if settings.transport == "http":
        from console.transports.http import HttpTransport

        assert settings.http_provider_key, "load_settings() requires a key for the http transport"
        return HttpTransport(
            settings.http_provider_url,
            settings.http_provider_key,
            timeout_seconds=settings.smtp_timeout_seconds,
            idempotency_window_seconds=settings.http_idempotency_window_seconds,
        )
    from console.transports.smtp import SmtpTransport

    return SmtpTransport(
        settings.smtp_url,
        connections=settings.smtp_connections,
        timeout_seconds=settings.smtp_timeout_seconds,
    )
