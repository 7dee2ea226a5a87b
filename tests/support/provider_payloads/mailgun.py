"""Mailgun webhook event-data.

Each function returns a fresh copy; the comment above each payload names where
its shape comes from. Values are kept as published except where a comment says
a test needs its own.
"""

from __future__ import annotations

import copy

# django-anymail tests/test_mailgun_webhooks.py (test_delivered_event): "an actual, complete
# (sanitized) delivered event as received from Mailgun"; the signature block is made by the test.
_MAILGUN_DELIVERED = {
    "tags": [],
    "timestamp": 1534108637.153125,
    "storage": {
        "url": "https://sw.api.mailgun.net/v3/domains/example.org/messages/eyJwI...",
        "key": "eyJwI...",
    },  # fmt: skip
    "recipient-domain": "example.com",
    "id": "hTWCTD81RtiDN-...",
    "campaigns": [],
    "user-variables": {},
    "flags": {
        "is-routed": False,
        "is-authenticated": True,
        "is-system-test": False,
        "is-test-mode": False,
    },  # fmt: skip
    "log-level": "info",
    "envelope": {
        "sending-ip": "333.123.123.200",
        "sender": "test@example.org",
        "transport": "smtp",
        "targets": "recipient@example.com",
    },  # fmt: skip
    "message": {
        "headers": {
            "to": "recipient@example.com",
            "message-id": "20180812211713.1.DF5966851B4BAA99@example.org",
            "from": "test@example.org",
            "subject": "Testing",
        },
        "attachments": [],
        "size": 809,
    },
    "recipient": "recipient@example.com",
    "event": "delivered",
    "delivery-status": {
        "tls": True,
        "mx-host": "smtp-in.example.com",
        "attempt-no": 1,
        "description": "",
        "session-seconds": 3.5700838565826416,
        "utf8": True,
        "code": 250,
        "message": "OK",
        "certificate-verified": True,
    },  # fmt: skip
}

# django-anymail tests/test_mailgun_webhooks.py (test_failed_permanent_event,
# test_failed_temporary_event); event ids added (Mailgun sends one with every event)
_MAILGUN_FAILED_PERMANENT = {
    "id": "failed-permanent-1",
    "event": "failed",
    "severity": "permanent",
    "reason": "bounce",
    "recipient": "invalid@example.com",
    "timestamp": 1534110422.389832,
    "log-level": "error",
    "message": {
        "headers": {
            "to": "invalid@example.com",
            "message-id": "20180812214658.1.0DF563D0B3597700@example.org",
            "from": "Test Sender ",
        }
    },  # fmt: skip
    "delivery-status": {
        "tls": True,
        "mx-host": "aspmx.l.example.org",
        "attempt-no": 1,
        "description": "",
        "session-seconds": 2.952177047729492,
        "utf8": True,
        "code": 550,
        "certificate-verified": True,
        "message": "5.1.1 The email account that you tried to reach does not "
        "exist. Please try\n5.1.1 double-checking the recipient's email address "
        "for typos",
    },  # fmt: skip
}
_MAILGUN_FAILED_TEMPORARY = {
    "id": "failed-temporary-1",
    "event": "failed",
    "severity": "temporary",
    "reason": "generic",
    "timestamp": 1534111899.659519,
    "log-level": "warn",
    "message": {
        "headers": {
            "to": "undeliverable@nomx.example.com",
            "message-id": "20180812214638.1.4A7D468E9BC18C5D@example.org",
            "from": "Test Sender ",
            "subject": "Testing",
        }
    },  # fmt: skip
    "recipient": "undeliverable@nomx.example.com",
    "delivery-status": {
        "attempt-no": 3,
        "description": "No MX for nomx.example.com",
        "session-seconds": 0.0,
        "retry-seconds": 1800,
        "code": 498,
        "message": "No MX for nomx.example.com",
    },  # fmt: skip
}
# Mailgun's "Events" reference: a permanent failure of reason suppress-bounce (code 605,
# "Not delivering to previously bounced address") — Mailgun never tried.
_MAILGUN_SUPPRESSED = {
    "id": "suppress-bounce-1",
    "event": "failed",
    "severity": "permanent",
    "reason": "suppress-bounce",
    "recipient": "invalid@example.com",
    "timestamp": 1534110500.0,
    "message": {
        "headers": {"to": "invalid@example.com", "message-id": "20180812214700.1.AAAA@example.org"}
    },  # fmt: skip
    "delivery-status": {
        "attempt-no": 1,
        "code": 605,
        "message": "Not delivering to previously bounced address",
    },  # fmt: skip
}


def mailgun(kind: str) -> dict:
    """Mailgun ``event-data``: delivered, failed_permanent, failed_temporary, suppressed."""
    return copy.deepcopy(
        {
            "delivered": _MAILGUN_DELIVERED,
            "failed_permanent": _MAILGUN_FAILED_PERMANENT,
            "failed_temporary": _MAILGUN_FAILED_TEMPORARY,
            "suppressed": _MAILGUN_SUPPRESSED,
        }[kind]
    )
