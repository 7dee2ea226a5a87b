"""Signing as Resend (Svix), Mailgun and SendGrid do, and the test app's keys for each."""

from __future__ import annotations

import base64
import functools
import json
import time
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from console.events import mailgun, resend, sendgrid

RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-signing-key-0123456789").decode()
POSTMARK_USER, POSTMARK_PASSWORD = "postmark-hook", "pm-pass-8c1e"
MAILGUN_KEY = "key-mailgun-test-signing-7f2a"


@functools.cache
def sendgrid_key() -> ec.EllipticCurvePrivateKey:
    """One P-256 key per test session."""
    return ec.generate_private_key(ec.SECP256R1())


def sendgrid_public_key(key: ec.EllipticCurvePrivateKey | None = None) -> str:
    der = (
        (key or sendgrid_key())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return base64.b64encode(der).decode()


def native_settings() -> dict[str, str]:
    """The CONSOLE_* variables that turn on every native endpoint."""
    return {
        "CONSOLE_RESEND_WEBHOOK_SECRET": RESEND_SECRET,
        "CONSOLE_POSTMARK_WEBHOOK_USER": POSTMARK_USER,
        "CONSOLE_POSTMARK_WEBHOOK_PASSWORD": POSTMARK_PASSWORD,
        "CONSOLE_MAILGUN_SIGNING_KEY": MAILGUN_KEY,
        "CONSOLE_SENDGRID_PUBLIC_KEY": sendgrid_public_key(),
    }


def now() -> str:
    return str(int(time.time()))


def resend_request(event: dict, *, svix_id: str, secret: str = RESEND_SECRET, timestamp=None):
    """(body, headers) of a Svix-signed Resend delivery."""
    body = json.dumps(event).encode()
    timestamp = timestamp or now()
    signature = resend.sign(secret, svix_id, timestamp, body)
    headers = {"svix-id": svix_id, "svix-timestamp": timestamp, "svix-signature": f"v1,{signature}"}
    return body, headers


def postmark_headers(user: str = POSTMARK_USER, password: str = POSTMARK_PASSWORD) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}", "Content-Type": "application/json"}


def mailgun_body(event_data: dict, *, key: str = MAILGUN_KEY, token: str, timestamp=None) -> bytes:
    """A Mailgun JSON webhook body with its signature block."""
    timestamp = timestamp or now()
    signature = mailgun.compute_signature(key, timestamp, token)
    block = {"timestamp": timestamp, "token": token, "signature": signature}
    return json.dumps({"signature": block, "event-data": event_data}).encode()


def sendgrid_request(events: Any, *, key=None, timestamp=None) -> tuple[bytes, dict]:
    """(body, headers) of a SendGrid batch signed with `key` (the test key by default)."""
    body = (json.dumps(events) + "\r\n").encode()
    timestamp = timestamp or now()
    der = (key or sendgrid_key()).sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    headers = {
        sendgrid.SIGNATURE_HEADER: base64.b64encode(der).decode(),
        sendgrid.TIMESTAMP_HEADER: timestamp,
    }
    return body, headers
