"""Parsers of the native webhooks' keys and the provider's name: a bad one stops start-up.

``console.config`` reads the variables and calls these; each returns the value
to keep or raises ``ConfigError`` naming the variable. The parsers' imports stay
inside the functions: reading the settings loads neither ``cryptography`` nor Flask.
"""

from __future__ import annotations

from console.core.setting_values import ConfigError


def svix_secret(name: str, raw: str) -> str:
    """A Resend (Svix) signing secret: ``whsec_`` followed by base64."""
    from console.events.resend import decode_secret

    return _checked(name, raw, decode_secret)


def ec_public_key(name: str, raw: str) -> str:
    """SendGrid's verification key: an ECDSA P-256 public key, base64 DER or PEM."""
    from console.events.sendgrid import load_public_key

    return _checked(name, raw, load_public_key)


def _checked(name: str, raw: str, check) -> str:
    value = raw.strip()
    try:
        check(value)
    except ValueError as error:
        raise ConfigError(f"{name}: {error}") from None
    return value


def provider_name(name: str, raw: str) -> str:
    """The provider behind the relay or HTTP transport: one of ``metadata.PROVIDERS``."""
    from console.events.metadata import PROVIDERS

    value = raw.strip().lower()
    if value not in PROVIDERS:
        raise ConfigError(f"{name} must be one of {', '.join(PROVIDERS)}, got {raw!r}")
    return value
