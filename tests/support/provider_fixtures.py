"""Test helpers for provider events: a local CA and SNS signing key, signed messages, an app.

The certificates are generated here with `cryptography` and served to the
product through its injectable certificate fetcher, which records every URL
it was asked for (so a test can prove no fetch happened for a bad host).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import uuid
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from console.events.sns import CertificateCache, canonical_string
from tests.conftest import TEST_SECRET_KEY

TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:ses-events"
FOREIGN_TOPIC_ARN = "arn:aws:sns:eu-west-1:999999999999:someone-else"
CERT_URL = "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef.pem"
WEBHOOK_SECRET = "whsec-test-6c1f0e"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject, issuer, public_key, signing_key, *, ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signing_key, hashes.SHA256())
    )


class SnsSigner:
    """A local CA, an SNS signing certificate issued by it, and a signer of SNS messages."""

    def __init__(self) -> None:
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ca_certificate = _certificate(
            "Test Root CA", "Test Root CA", ca_key.public_key(), ca_key, ca=True
        )
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.certificate = _certificate(
            "sns.amazonaws.com", "Test Root CA", self.key.public_key(), ca_key, ca=False
        )
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def sign(
        self, message: dict[str, Any], *, version: str = "1", key=None, cert_url: str = CERT_URL
    ) -> dict[str, Any]:
        """Return `message` with SignatureVersion, SigningCertURL and a valid Signature."""
        algorithm = hashes.SHA1() if version == "1" else hashes.SHA256()
        signed = canonical_string(message)
        signature = (key or self.key).sign(signed, padding.PKCS1v15(), algorithm)
        return {
            **message,
            "SignatureVersion": version,
            "SigningCertURL": cert_url,
            "Signature": base64.b64encode(signature).decode(),
        }

    def notification(
        self,
        ses_message: Any,
        *,
        message_id: str | None = None,
        topic: str = TOPIC_ARN,
        timestamp: str | None = None,
        **signing,
    ) -> dict[str, Any]:
        """A signed SNS Notification carrying `ses_message` (JSON-encoded unless a string)."""
        body = ses_message if isinstance(ses_message, str) else json.dumps(ses_message)
        message = {
            "Type": "Notification",
            "MessageId": message_id or str(uuid.uuid4()),
            "TopicArn": topic,
            "Message": body,
            "Timestamp": timestamp or sns_now(),
            "UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
        }
        return self.sign(message, **signing)

    def subscription_confirmation(
        self,
        *,
        topic: str = TOPIC_ARN,
        subscribe_url: str | None = None,
        kind: str = "SubscriptionConfirmation",
    ) -> dict[str, Any]:
        """A signed SubscriptionConfirmation (or, with `kind`, UnsubscribeConfirmation)."""
        message = {
            "Type": kind,
            "MessageId": str(uuid.uuid4()),
            "Token": "2336412f37fb687f5d51e6e2425c464de12884",
            "TopicArn": topic,
            "Message": f"You have chosen to subscribe to the topic {topic}.",
            "SubscribeURL": subscribe_url
            or "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336",
            "Timestamp": sns_now(),
        }
        return self.sign(message)


def sns_now() -> str:
    """Now as SNS writes its Timestamp (messages older than an hour are refused)."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@functools.cache
def sns_signer() -> SnsSigner:
    """One signer per test session: RSA key generation is the slow part."""
    return SnsSigner()


class RecordingFetcher:
    """Serves PEM bytes for any URL and remembers each URL it was asked for."""

    def __init__(self, pem: bytes) -> None:
        self.pem = pem
        self.urls: list[str] = []

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        return self.pem


def make_events_app(db_url: str, **extra: Any):
    """The console app on `db_url` with the SNS allow-list, the webhook secret and a fetcher."""
    from console.app import create_app

    config = {
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": TEST_SECRET_KEY,
        "CONSOLE_SNS_TOPIC_ARNS": f"{TOPIC_ARN}, arn:aws:sns:us-east-1:123456789012:other",
        "CONSOLE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "TESTING": True,
        **extra,
    }
    app = create_app(config)
    fetcher = RecordingFetcher(sns_signer().pem)
    app.extensions["console.sns_certificates"] = CertificateCache(fetch=fetcher)
    return app, fetcher


def dispose(app) -> None:
    with app.app_context():
        from console.web.extensions import db

        db.engine.dispose()


def ses_event(kind: str, provider_message_id: str, **sections: Any) -> dict[str, Any]:
    """An SES event-publishing notification about message `provider_message_id`."""
    return {
        "eventType": kind,
        "mail": {
            "timestamp": "2025-01-31T11:59:58.000Z",
            "messageId": provider_message_id,
            "source": "noreply@outbox.localhost",
            "destination": ["ada@example.com"],
            "commonHeaders": {"subject": "Your code"},
        },
        **sections,
    }


def bounce(provider_message_id: str, bounce_type: str, *recipients: str, raw: bool = False):
    """An SES bounce of `recipients`; `raw` gives the notificationType shape."""
    section = {
        "bounceType": bounce_type,
        "bounceSubType": "General",
        "timestamp": "2025-01-31T12:00:05.000Z",
        "feedbackId": "0102-feedback",
        "bouncedRecipients": [
            {
                "emailAddress": r,
                "action": "failed",
                "status": "5.1.1",
                "diagnosticCode": "smtp; 550 5.1.1 user unknown",
            }
            for r in recipients
        ],
    }
    message = ses_event("Bounce", provider_message_id, bounce=section)
    if raw:
        message["notificationType"] = message.pop("eventType")
    return message


def delivery(provider_message_id: str, *recipients: str, at: str = "2025-01-31T12:00:03.000Z"):
    section = {
        "timestamp": at,
        "recipients": list(recipients),
        "smtpResponse": "250 2.6.0 Message received",
        "processingTimeMillis": 812,
    }
    return ses_event("Delivery", provider_message_id, delivery=section)


def complaint(provider_message_id: str, *recipients: str):
    section = {
        "timestamp": "2025-01-31T12:10:00.000Z",
        "feedbackId": "0102-complaint",
        "complaintFeedbackType": "abuse",
        "complainedRecipients": [{"emailAddress": r} for r in recipients],
    }
    return ses_event("Complaint", provider_message_id, complaint=section)
