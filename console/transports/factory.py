"""Build the transport that the settings name."""

from __future__ import annotations

from typing import Any

from console.config import Settings
from console.transports.base import Transport
from console.transports.smtp import SmtpTransport


def make_transport(settings: Settings) -> Transport:
    """The transport CONSOLE_TRANSPORT names: the SMTP relay or the HTTP provider."""
    if settings.transport == "http":
        return _http_transport(settings)
    return SmtpTransport(
        settings.smtp_url,
        connections=settings.smtp_connections,
        timeout_seconds=settings.smtp_timeout_seconds,
        ehlo_name=settings.smtp_ehlo_name,
        discard_ehlo_keywords=settings.smtp_discard_ehlo_keywords,
    )


def _http_transport(settings: Settings) -> Transport:
    """CONSOLE_PROVIDER's native API (Resend when none is named)."""
    from console.transports.http import RESEND_URL, HttpTransport
    from console.transports.http_core import ProviderTransport

    options = {
        "timeout_seconds": settings.smtp_timeout_seconds,
        "idempotency_window_seconds": settings.http_idempotency_window_seconds,
    }
    if settings.provider in (None, "resend"):
        url = settings.http_provider_url or RESEND_URL
        return HttpTransport(url, settings.http_provider_key or "", **options)
    return ProviderTransport(_PROVIDER_APIS[settings.provider](settings), **options)


def _postmark(settings: Settings) -> Any:
    from console.transports.postmark import POSTMARK_URL, PostmarkApi

    url = settings.http_provider_url or POSTMARK_URL
    return PostmarkApi(url, settings.http_provider_key or "", settings.postmark_message_stream)


def _mailgun(settings: Settings) -> Any:
    from console.transports.mailgun import MAILGUN_URL, MailgunApi

    url = settings.http_provider_url or MAILGUN_URL
    return MailgunApi(url, settings.http_provider_key or "", settings.mailgun_domain or "")


def _sendgrid(settings: Settings) -> Any:
    from console.transports.sendgrid import SENDGRID_URL, SendGridApi

    return SendGridApi(settings.http_provider_url or SENDGRID_URL, settings.http_provider_key or "")


def _ses(settings: Settings) -> Any:
    from console.transports.ses import SesApi, sdk_credentials, ses_url

    region, credentials = sdk_credentials()
    url = settings.http_provider_url or ses_url(region)
    return SesApi(url, region, credentials, settings.ses_configuration_set)


_PROVIDER_APIS = {
    "postmark": _postmark,
    "mailgun": _mailgun,
    "sendgrid": _sendgrid,
    "ses": _ses,
}
