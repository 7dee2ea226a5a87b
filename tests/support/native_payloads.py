"""Webhook payloads of Resend, Postmark, Mailgun and SendGrid, as their sources publish them.

Each function returns a fresh copy; the comment above it names where the shape
comes from. Values are kept as published except where a test needs its own
(they say so).
"""

from __future__ import annotations

import copy
import json

# --- Resend -----------------------------------------------------------------------------------

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

# --- Postmark ---------------------------------------------------------------------------------

_POSTMARK = {
    # django-anymail tests/test_postmark_webhooks.py (test_bounce_event), from Postmark's docs
    "hard_bounce": {
        "RecordType": "Bounce",
        "ID": 901542550,
        "Type": "HardBounce",
        "TypeCode": 1,
        "ServerID": 23,
        "Name": "Hard bounce",
        "MessageID": "2706ee8a-737c-4285-b032-ccd317af53ed",
        "Description": "The server was unable to deliver your message (ex: unknown user, "
        "mailbox not found).",
        "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
        "Email": "bounce@example.com",
        "From": "sender@example.com",
        "BouncedAt": "2016-04-27T16:28:50.3963933-04:00",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": True,
        "Subject": "Postmark event test",
        "Content": "Return-Path: <>\r\nReceived: ... the original message ...",
    },
    # the same record shape with Postmark's SoftBounce and Transient type codes ("Bounce types")
    "soft_bounce": {
        "RecordType": "Bounce",
        "ID": 901542551,
        "Type": "SoftBounce",
        "TypeCode": 4096,
        "MessageID": "2706ee8a-737c-4285-b032-ccd317af53ed",
        "Description": "Unable to temporarily deliver this email.",
        "Details": "smtp;452 4.2.2 The email account that you tried to reach is over quota.",
        "Email": "bounce@example.com",
        "BouncedAt": "2016-04-27T16:30:00.0000000-04:00",
        "Inactive": False,
    },
    "transient": {
        "RecordType": "Bounce",
        "ID": 901542552,
        "Type": "Transient",
        "TypeCode": 2,
        "MessageID": "2706ee8a-737c-4285-b032-ccd317af53ed",
        "Description": "The server could not temporarily deliver your message.",
        "Details": "smtp;421 4.4.1 connection timed out",
        "Email": "bounce@example.com",
        "BouncedAt": "2016-04-27T16:20:00.0000000-04:00",
    },
    # django-anymail tests/test_postmark_webhooks.py (test_delivered_event)
    "delivery": {
        "RecordType": "Delivery",
        "ServerId": 23,
        "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
        "Recipient": "recipient@example.com",
        "Tag": "welcome-email",
        "Metadata": {"cohort": "2014-08-A", "userid": "12345"},
        "DeliveredAt": "2014-08-01T13:28:10.2735393-04:00",
        "Details": "Test delivery webhook details",
    },
    # django-anymail tests/test_postmark_webhooks.py (test_spam_event)
    "spam_complaint": {
        "RecordType": "SpamComplaint",
        "ID": 901542550,
        "Type": "SpamComplaint",
        "TypeCode": 512,
        "Name": "Spam complaint",
        "Tag": "Test",
        "MessageID": "2706ee8a-737c-4285-b032-ccd317af53ed",
        "ServerID": 1234,
        "Description": "",
        "Details": "Test spam complaint details",
        "Email": "spam@example.com",
        "From": "sender@example.com",
        "BouncedAt": "2016-04-27T16:28:50.3963933-04:00",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": False,
        "Subject": "Postmark event test",
    },
    # django-anymail tests/test_postmark_webhooks.py (test_unsubscribe)
    "subscription_change": {
        "RecordType": "SubscriptionChange",
        "MessageID": "a4909a96-73d7-4c49-b148-a54522d3f7ac",
        "ServerID": 23,
        "MessageStream": "outbound",
        "ChangedAt": "2022-06-05T17:17:32Z",
        "Recipient": "john@example.com",
        "Origin": "Recipient",
        "SuppressSending": True,
        "SuppressionReason": "ManualSuppression",
        "Tag": "welcome-email",
        "Metadata": {"example": "value", "example_2": "value"},
    },
    # django-anymail tests/test_postmark_webhooks.py (test_misconfigured_inbound)
    "inbound": {"FromFull": {"Email": "from@example.org"}, "TextBody": "a reply"},
}


def postmark(kind: str) -> dict:
    """A Postmark record: hard_bounce, soft_bounce, transient, delivery, spam_complaint, ..."""
    return copy.deepcopy(_POSTMARK[kind])


# --- Mailgun ----------------------------------------------------------------------------------

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


# --- SendGrid ---------------------------------------------------------------------------------

# sendgrid/sendgrid-python test/unit/test_eventwebhook.py: a real signed request (key,
# signature, timestamp and the exact body, with its trailing CRLF).
SENDGRID_VECTOR = {
    "public_key": "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1f"
    "lpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==",
    "signature": "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIq"
    "Hh89M15TluLtEZtM=",
    "timestamp": "1600112502",
    "body": (
        json.dumps(
            [
                {
                    "email": "hello@world.com",
                    "event": "dropped",
                    "reason": "Bounced Address",
                    "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                    "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-"
                    "18-5F5FC76C-9.0",
                    "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                    "timestamp": 1600112492,
                }
            ],
            sort_keys=True,
            separators=(",", ":"),
        )
        + "\r\n"
    ).encode(),
}

# SendGrid "Event Webhook Reference": the example event of each kind, about one message
# (sg_message_id 14c5d75ce93.dfd.64b469...); "bounce" and "dropped" as the reference shows them.
_SG_MESSAGE = "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0"
_SG_COMMON = {"email": "example@test.com", "timestamp": 1513299569,
              "smtp-id": "<14c5d75ce93.dfd.64b469@ismtpd-555>", "sg_message_id": _SG_MESSAGE,
              "category": "cat facts"}  # fmt: skip
SENDGRID_BATCH = [
    {**_SG_COMMON, "event": "processed", "sg_event_id": "sg_event_id_processed"},
    {
        **_SG_COMMON,
        "event": "deferred",
        "sg_event_id": "sg_event_id_deferred",
        "response": "400 try again later",
        "attempt": "5",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "delivered",
        "sg_event_id": "sg_event_id_delivered",
        "response": "250 OK",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "bounce",
        "sg_event_id": "sg_event_id_bounce",
        "reason": "500 unknown recipient",
        "status": "5.0.0",
        "type": "bounce",
        "bounce_classification": "Invalid Address",
    },  # fmt: skip
    {**_SG_COMMON, "event": "spamreport", "sg_event_id": "sg_event_id_spamreport"},
    {
        **_SG_COMMON,
        "email": "dropped@test.com",
        "event": "dropped",
        "sg_event_id": "sg_event_id_dropped",
        "reason": "Bounced Address",
        "status": "5.0.0",
    },  # fmt: skip
    {
        **_SG_COMMON,
        "event": "open",
        "sg_event_id": "sg_event_id_open",
        "useragent": "Mozilla/4.0",
        "ip": "255.255.255.255",
    },  # fmt: skip
]


def sendgrid_batch() -> list[dict]:
    return copy.deepcopy(SENDGRID_BATCH)
