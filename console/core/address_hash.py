"""The keyed hash that stands in for an email address once the address must be forgotten.

``addr:`` followed by the first 12 hex digits of HMAC-SHA256(secret key, address
lower-cased). Without the key nobody can tell which address a hash stands for,
yet the console, holding the key, can still recognise it: a forgotten address
stays suppressed. Pure: no IO, nothing of the application.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

PREFIX = "addr:"
HEX_DIGITS = 12
_HASH_FORM = re.compile(rf"^{PREFIX}[0-9a-f]{{{HEX_DIGITS}}}$")


def address_hash(secret_key: str, address: str) -> str:
    """Return ``addr:<12 hex>``, the keyed hash of `address` (case and outer spaces ignored)."""
    if not secret_key:
        raise ValueError("a secret key is required to hash an address")
    digest = hmac.new(
        secret_key.encode(), address.strip().lower().encode(), hashlib.sha256
    ).hexdigest()
    return PREFIX + digest[:HEX_DIGITS]


def is_address_hash(value: str | None) -> bool:
    """Return whether `value` is already a keyed hash rather than an address."""
    return bool(value) and _HASH_FORM.match(value) is not None  # type: ignore[arg-type]


def replace_address(text: str | None, address: str, token: str) -> str | None:
    """Return `text` with every occurrence of `address`, in any letter case, replaced by `token`."""
    if not text or not address:
        return text
    return re.sub(re.escape(address), token, text, flags=re.IGNORECASE)


def replace_address_in(value: Any, address: str, token: str) -> Any:
    """Return a JSON-like `value` with `address` replaced by `token` in every string, keys too."""
    if isinstance(value, str):
        return replace_address(value, address, token)
    if isinstance(value, dict):
        return {
            replace_address_in(key, address, token): replace_address_in(item, address, token)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [replace_address_in(item, address, token) for item in value]
    return value
