"""Postmark webhook records.

Each function returns a fresh copy; the comment above each payload names where
its shape comes from. Values are kept as published except where a comment says
a test needs its own.
"""

from __future__ import annotations

import copy

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
