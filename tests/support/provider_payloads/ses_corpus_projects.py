"""Public SES notifications from other projects' test suites: django-anymail and django-ses.

See ``ses_corpus`` for the case format; each case names its source.
"""

from __future__ import annotations

from tests.support.provider_payloads.ses_corpus import (
    ANYMAIL_MESSAGE,
    DJANGO_SES_MESSAGE,
    FAILED,
    SNS_NOW,
    SUBMITTED,
    Case,
    Intent,
    _django_ses_mail,
    _one,
)

ANYMAIL_MAIL = {"messageId": ANYMAIL_MESSAGE, "destination": ["recipient@example.com"]}


def _django_ses_four(**expected) -> tuple[Intent, ...]:
    intents = []
    for n in range(1, 5):
        status, facts = expected.get(f"r{n}", ("ambiguous", ()))
        intents.append(Intent(f"recipient{n}@example.com", DJANGO_SES_MESSAGE, status=status,
                              facts=facts))  # fmt: skip
    return tuple(intents)


CASES = [
    # django-anymail test_multiple_bounce_event: two recipients, no status
    Case(
        "anymail multiple bounce",
        "django-anymail",
        {
            "notificationType": "Bounce",
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [
                    {"emailAddress": "jane@example.com"},
                    {"emailAddress": "richard@example.com"},
                ],
            },
            "mail": {
                "messageId": "00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000",
                "destination": ["jane@example.com", "mary@example.com", "richard@example.com"],
            },
        },
        (
            Intent(
                "jane@example.com",
                "00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000",
                status=SUBMITTED,
                facts=("bounced_at",),
            ),
            Intent(
                "richard@example.com",
                "00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000",
                status=SUBMITTED,
                facts=("bounced_at",),
            ),
        ),
        (
            ("bounced", "permanent", "jane@example.com"),
            ("bounced", "permanent", "richard@example.com"),
        ),
        {"jane@example.com": "bounce", "richard@example.com": "bounce"},
        occurred_at=SNS_NOW,
    ),  # fmt: skip
    # django-anymail test_send_event / test_reject_event / test_open_event / test_click_event
    Case(
        "anymail send",
        "django-anymail",
        {
            "eventType": "Send",
            "send": {},
            "mail": {**ANYMAIL_MAIL, "timestamp": "2016-10-14T05:02:16.645Z"},
        },
        _one(SUBMITTED, pid=ANYMAIL_MESSAGE),
        (("accepted", None, "recipient@example.com"),),
        occurred_at="2016-10-14T05:02:16.645Z",
    ),  # fmt: skip
    Case(
        "anymail reject",
        "django-anymail",
        {
            "eventType": "Reject",
            "reject": {"reason": "Bad content"},
            "mail": {**ANYMAIL_MAIL, "timestamp": "2016-10-14T17:38:15.211Z"},
        },
        _one(FAILED, "rejected_at", pid=ANYMAIL_MESSAGE),
        (("rejected", None, "recipient@example.com"),),
    ),  # fmt: skip
    Case(
        "anymail open",
        "django-anymail",
        {
            "eventType": "Open",
            "mail": ANYMAIL_MAIL,
            "open": {
                "ipAddress": "192.0.2.1",
                "timestamp": "2017-08-09T22:00:19.652Z",
                "userAgent": "Mozilla/5.0 (iPhone; CPU iPhone OS 10_3_3 like Mac OS X)...",
            },
        },
        _one("ambiguous", pid=ANYMAIL_MESSAGE),
        (("open", None, "recipient@example.com"),),
        occurred_at="2017-08-09T22:00:19.652Z",
    ),  # fmt: skip
    Case(
        "anymail click",
        "django-anymail",
        {
            "eventType": "Click",
            "mail": ANYMAIL_MAIL,
            "click": {
                "ipAddress": "192.0.2.1",
                "link": "https://docs.aws.amazon.com/ses/latest/DeveloperGuide/",
                "timestamp": "2017-08-09T23:51:25.570Z",
                "userAgent": "Mozilla/5.0 ...",
            },
        },
        _one("ambiguous", pid=ANYMAIL_MESSAGE),
        (("click", None, "recipient@example.com"),),
    ),  # fmt: skip
    # django-anymail test_sns_confirmation_success_notification: plain text, not JSON
    Case(
        "ses topic validated text",
        "django-anymail",
        "Successfully validated SNS topic for Amazon SES event publishing.",
        (),
        (("unknown", None, None),),
        occurred_at=SNS_NOW,
    ),  # fmt: skip
    # django-ses get_mock_bounce: a Permanent bounce with a 4.0.0 "delayed" recipient
    Case(
        "django-ses bounce with a delayed recipient",
        "django-ses",
        {
            "eventType": "Bounce",
            "mail": _django_ses_mail(),
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [
                    {
                        "status": "5.0.0",
                        "action": "failed",
                        "diagnosticCode": "smtp; 550 user unknown",
                        "emailAddress": "recipient1@example.com",
                    },
                    {
                        "status": "4.0.0",
                        "action": "delayed",
                        "emailAddress": "recipient2@example.com",
                    },
                ],
                "reportingMTA": "example.com",
                "timestamp": "2012-05-25T14:59:38.605-07:00",
                "feedbackId": "000001378603176d-5a4b5ad9-6f30-4198-a8c3-b1eb0c270a1d-000000",
            },
        },
        _django_ses_four(r1=(SUBMITTED, ("bounced_at",)), r2=(SUBMITTED, ("bounced_at",))),
        (
            ("bounced", "permanent", "recipient1@example.com"),
            ("bounced", "transient", "recipient2@example.com"),
        ),
        {"recipient1@example.com": "bounce"},
        occurred_at="2012-05-25T21:59:38.605Z",
    ),  # fmt: skip
    # django-ses get_mock_bounce_no_status_transient
    Case(
        "django-ses transient bounce without status",
        "django-ses",
        {
            "notificationType": "Bounce",
            "mail": _django_ses_mail(),
            "bounce": {
                "bounceType": "Transient",
                "bounceSubType": "General",
                "bouncedRecipients": [
                    {"emailAddress": "recipient1@example.com"},
                    {"emailAddress": "recipient2@example.com"},
                ],
                "reportingMTA": "example.com",
                "timestamp": "2012-05-25T14:59:38.605-07:00",
            },
        },
        _django_ses_four(r1=(SUBMITTED, ("bounced_at",)), r2=(SUBMITTED, ("bounced_at",))),
        (
            ("bounced", "transient", "recipient1@example.com"),
            ("bounced", "transient", "recipient2@example.com"),
        ),
    ),  # fmt: skip
    # django-ses get_mock_complaint / get_mock_delivery (an empty smtpResponse)
    Case(
        "django-ses complaint",
        "django-ses",
        {
            "eventType": "Complaint",
            "mail": _django_ses_mail(),
            "complaint": {
                "userAgent": "ExampleCorp Feedback Loop (V0.01)",
                "complainedRecipients": [{"emailAddress": "recipient1@example.com"}],
                "complaintFeedbackType": "abuse",
                "arrivalDate": "2009-12-03T04:24:21.000-05:00",
                "timestamp": "2012-05-25T14:59:38.623Z",
            },
        },
        _django_ses_four(r1=(SUBMITTED, ("complained_at",))),
        (("complained", None, "recipient1@example.com"),),
        {"recipient1@example.com": "complaint"},
    ),  # fmt: skip
    Case(
        "django-ses delivery",
        "django-ses",
        {
            "eventType": "Delivery",
            "mail": _django_ses_mail(),
            "delivery": {
                "timestamp": "2021-01-26T14:38:39.270Z",
                "processingTimeMillis": 1796,
                "recipients": ["recipient1@example.com"],
                "smtpResponse": "",
                "reportingMTA": "",
            },
        },
        _django_ses_four(r1=(SUBMITTED, ("delivered_at",))),
        (("delivered", None, "recipient1@example.com"),),
        occurred_at="2021-01-26T14:38:39.270Z",
    ),  # fmt: skip
    # django-ses get_mock_received_sns: inbound mail sent to the events topic (content cut short)
    Case(
        "django-ses inbound received",
        "django-ses",
        {
            "notificationType": "Received",
            "mail": {
                "timestamp": "2024-10-27T17:13:33.684Z",
                "source": "alexandernst@gmail.com",
                "messageId": "0bj0fp4ev5vrddnpflq7a17rpgmo7gnhslacdu01",
                "destination": ["foo@bar.com"],
                "commonHeaders": {
                    "messageId": "<CACuz9s0EbFBFEdgJN6Pfc74mQ6+-S36UEZXO1="
                    "pbabnGx5ObOw@mail.gmail.com>",
                    "subject": "test",
                },
            },
            "receipt": {
                "timestamp": "2012-05-25T14:59:38.605-07:00",
                "processingTimeMillis": 825,
                "recipients": ["foo@bar.com"],
                "spamVerdict": {"status": "PASS"},
                "action": {
                    "type": "SNS",
                    "encoding": "BASE64",
                    "topicArn": "arn:aws:sns:us-east-1:112310073099:inbox-foo-bar",
                },
            },
            "content": "UmV0dXJuLVBhdGg6IDxhbGV4YW5kZXJuc3RAZ21haWwuY29tPg0K" * 40,
        },
        (),
        (("inbound_mail", None, None),),
    ),  # fmt: skip
]
