"""Resend webhook payloads and Svix's published signature vector.

Each function returns a fresh copy; the comment above each payload names where
its shape comes from. Values are kept as published except where a comment says
a test needs its own.
"""

from __future__ import annotations

import copy

# resend.com/docs/webhooks/emails/bounced (2025 example, bounce with type and subType)
_RESEND_BOUNCED = {
    "type": "email.bounced",
    "created_at": "2024-11-22T23:41:12.126Z",
    "data": {
        "broadcast_id": "8b146471-e88e-4322-86af-016cd36fd216",
        "created_at": "2024-11-22T23:41:11.894719+00:00",
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
        "from": "Acme <onboarding@resend.dev>",
        "to": ["delivered@resend.dev"],
        "subject": "Sending this example",
        "template_id": "43f68331-0622-4e15-8202-246a0388854b",
        "bounce": {
            "message": "The recipient's email address is on the suppression list because it "
            "has a recent history of producing hard bounces.",
            "subType": "Suppressed",
            "type": "Permanent",
        },
        "tags": {"category": "confirm_email"},
    },
}

# django-anymail tests/test_resend_webhooks.py (test_hard_bounced_event): a real hard bounce
_RESEND_HARD_BOUNCE = {
    "created_at": "2023-10-02T18:11:26.101Z",
    "data": {
        "bounce": {
            "message": "The recipient's email provider sent a hard bounce message, but didn't "
            "specify the reason for the hard bounce. We recommend removing the recipient's "
            "email address from your mailing list."
        },
        "created_at": "2023-10-02T18:11:25.729Z",
        "email_id": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
        "from": "Sender <from@example.com>",
        "subject": "Sending test",
        "to": ["bounced@resend.dev"],
    },
    "type": "email.bounced",
}

# resend.com/docs/dashboard/webhooks/event-types (email.sent, email.delivered, email.complained,
# email.delivery_delayed share this "data"); the type is set by the caller.
_RESEND_SIMPLE = {
    "type": "email.delivered",
    "created_at": "2024-02-22T23:41:12.126Z",
    "data": {
        "created_at": "2024-02-22T23:41:11.894719+00:00",
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
        "from": "Acme <onboarding@resend.dev>",
        "to": ["delivered@resend.dev"],
        "subject": "Sending this example",
    },
}

# resend.com/docs/webhooks/emails/failed ("data.failed.reason")
_RESEND_FAILED = {
    "type": "email.failed",
    "created_at": "2025-06-02T12:00:01.000Z",
    "data": {
        "created_at": "2025-06-02T12:00:00.000000+00:00",
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
        "from": "Acme <onboarding@resend.dev>",
        "to": ["delivered@resend.dev"],
        "subject": "Sending this example",
        "failed": {"reason": "reached_daily_quota"},
    },
}


def resend(kind: str = "email.delivered") -> dict:
    """A Resend event of `kind` ("bounced-suppressed", "bounced-hard", "failed", or a type)."""
    if kind == "bounced-suppressed":
        return copy.deepcopy(_RESEND_BOUNCED)
    if kind == "bounced-hard":
        return copy.deepcopy(_RESEND_HARD_BOUNCE)
    if kind == "failed":
        return copy.deepcopy(_RESEND_FAILED)
    return {**copy.deepcopy(_RESEND_SIMPLE), "type": kind}


# Svix "Verifying Webhooks Manually" / svix test suite: secret, message, and its signature.
SVIX_VECTOR = {
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "timestamp": "1614265330",
    "body": b'{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
