"""Public SES notifications, each with the facts, statuses and suppressions it must produce.

Sources: the SES Developer Guide ("Amazon SNS notification examples", "Examples
of event data that Amazon SES publishes to Amazon SNS", "Contents of event
data"), django-anymail ``tests/test_amazon_ses_webhooks.py`` and django-ses
``tests/mocks.py``; each case names its own. They are re-signed by the test SNS
signer (the real certificates cannot be fetched here). Every intent of a case
starts ``ambiguous``, so what settles it shows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

AMBIGUOUS, SUBMITTED, FAILED = "ambiguous", "submitted", "failed"
# When this test session started, as an SNS Timestamp: SNS refuses messages an hour old, so
# the envelope of each case is this recent, and a case without a time of its own has this one.
_STARTED = dt.datetime.now(dt.UTC)
SNS_NOW = _STARTED.strftime("%Y-%m-%dT%H:%M:%S.") + f"{_STARTED.microsecond // 1000:03d}Z"

FACTS = ("delivered_at", "bounced_at", "complained_at", "delayed_at", "rejected_at")


@dataclasses.dataclass(frozen=True)
class Intent:
    to: str
    provider_id: str | None = None
    message_id: str | None = None
    status: str = AMBIGUOUS  # expected after the notification
    facts: tuple[str, ...] = ()  # the fact columns set; the others stay empty


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    source: str
    message: Any  # the SES notification (the SNS "Message"), a dict or a text
    intents: tuple[Intent, ...]
    events: tuple[tuple[str, str | None, str | None], ...]  # (event_type, bounce_type, recipient)
    suppressed: dict[str, str] = dataclasses.field(default_factory=dict)  # address -> reason
    occurred_at: str | None = None  # of the first event
    sns_timestamp: str = SNS_NOW


AWS_JANE_MESSAGE = "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa0680-000000"
AWS_COMPLAINT_MESSAGE = "000001378603177f-7a5433e7-8edb-42ae-af10-f0181f34d6ee-000000"
AWS_EVENT_MESSAGE = "EXAMPLE7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000"
ANYMAIL_MESSAGE = "7c191be45-e9aedb9a-02f9-4d12-a87d-dd0099a07f8a-000000"
DJANGO_SES_MESSAGE = "000001378603177f-7a5433e7-8edb-42ae-af10-f0181f34d6ee-000000"
THREE = ["jane@example.com", "mary@example.com", "richard@example.com"]


def _aws_mail(message_id: str, destination: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "timestamp": "2016-01-27T14:59:38.237Z",
        "source": "john@example.com",
        "sourceArn": "arn:aws:ses:us-east-1:888888888888:identity/example.com",
        "sourceIp": "127.0.3.0",
        "sendingAccountId": "123456789012",
        "callerIdentity": "IAM_user_or_role_name",
        "messageId": message_id,
        "destination": destination,
        **extra,
    }


def _event_mail(message_id: str = AWS_EVENT_MESSAGE) -> dict[str, Any]:
    # "Examples of event data that Amazon SES publishes to Amazon SNS": the common mail object
    return {
        "timestamp": "2017-08-05T00:41:02.669Z",
        "source": "Sender Name <sender@example.com>",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/sender@example.com",
        "sendingAccountId": "123456789012",
        "messageId": message_id,
        "destination": ["recipient@example.com"],
        "headersTruncated": False,
        "tags": {"ses:configuration-set": ["ConfigSet"], "ses:source-ip": ["192.0.2.0"]},
    }


def _django_ses_mail() -> dict[str, Any]:
    # django-ses tests/mocks.py get_mock_email()
    return {
        "timestamp": "2012-05-25T14:59:38.623-07:00",
        "messageId": DJANGO_SES_MESSAGE,
        "source": "sender@example.com",
        "destination": [f"recipient{n}@example.com" for n in range(1, 5)],
    }


def _three(message_id: str, **expected: tuple[str, tuple[str, ...]]) -> tuple[Intent, ...]:
    """An intent to each of jane, mary and richard; `expected` overrides one's outcome."""
    intents = []
    for address in THREE:
        status, facts = expected.get(address.split("@")[0], (AMBIGUOUS, ()))
        intents.append(Intent(address, message_id, status=status, facts=facts))
    return tuple(intents)


def _one(status: str, *facts: str, to: str = "recipient@example.com", pid=AWS_EVENT_MESSAGE):
    return (Intent(to, pid, status=status, facts=facts),)


CASES = [
    # SES Developer Guide, "Bounce notification with a DSN" (as django-anymail's test_bounce_event
    # copies it): its Message-ID header names the intent to jane
    Case(
        "aws bounce with DSN",
        "SES Developer Guide",
        {
            "notificationType": "Bounce",
            "bounce": {
                "bounceType": "Permanent",
                "reportingMTA": "dns; email.example.com",
                "bouncedRecipients": [
                    {
                        "emailAddress": "jane@example.com",
                        "status": "5.1.1",
                        "action": "failed",
                        "diagnosticCode": "smtp; 550 5.1.1 <jane@example.com>... User unknown",
                    }
                ],  # fmt: skip
                "bounceSubType": "General",
                "timestamp": "2016-01-27T14:59:44.101Z",
                "feedbackId": "00000138111222aa-44455566-cccc-cccc-cccc-ddddaaaa068a-000000",
                "remoteMtaIp": "127.0.2.0",
            },
            "mail": _aws_mail(
                AWS_JANE_MESSAGE,
                THREE,
                headersTruncated=False,
                headers=[{"name": "Message-ID", "value": "custom-message-ID"}],
                commonHeaders={"messageId": "custom-message-ID", "subject": "Hello"},
            ),
        },
        (
            Intent(
                "jane@example.com",
                message_id="<custom-message-ID>",
                status=SUBMITTED,
                facts=("bounced_at",),
            ),
        ),  # fmt: skip
        (("bounced", "permanent", "jane@example.com"),),
        {"jane@example.com": "bounce"},
        occurred_at="2016-01-27T14:59:44.101Z",
    ),
    # SES Developer Guide, "Bounce notification without a DSN"
    Case(
        "aws bounce without DSN",
        "SES Developer Guide",
        {
            "notificationType": "Bounce",
            "bounce": {
                "bounceType": "Permanent",
                "reportingMTA": "dns; email.example.com",
                "bouncedRecipients": [{"emailAddress": "jane@example.com"}],
                "bounceSubType": "General",
                "timestamp": "2016-01-27T14:59:44.101Z",
                "feedbackId": "00000138111222aa-33322211-cccc-cccc-cccc-ddddaaaa068a-000000",
                "remoteMtaIp": "127.0.2.0",
            },
            "mail": _aws_mail(AWS_JANE_MESSAGE, THREE),
        },
        _three(AWS_JANE_MESSAGE, jane=(SUBMITTED, ("bounced_at",))),
        (("bounced", "permanent", "jane@example.com"),),
        {"jane@example.com": "bounce"},
    ),
    # SES Developer Guide, "Complaint notification with a feedback report"
    Case(
        "aws complaint with feedback report",
        "SES Developer Guide",
        {
            "notificationType": "Complaint",
            "complaint": {
                "userAgent": "AnyCompany Feedback Loop (V0.01)",
                "complainedRecipients": [{"emailAddress": "richard@example.com"}],
                "complaintFeedbackType": "abuse",
                "arrivalDate": "2016-01-27T14:59:38.237Z",
                "timestamp": "2016-01-27T14:59:38.237Z",
                "feedbackId": "000001378603177f-18c07c78-fa81-4a58-9dd1-fedc3cb8f49a-000000",
            },
            "mail": _aws_mail(AWS_COMPLAINT_MESSAGE, THREE),
        },
        _three(AWS_COMPLAINT_MESSAGE, richard=(SUBMITTED, ("complained_at",))),
        (("complained", None, "richard@example.com"),),
        {"richard@example.com": "complaint"},
    ),
    # SES Developer Guide, "Complaint notification without a feedback report"
    Case(
        "aws complaint without feedback report",
        "SES Developer Guide",
        {
            "notificationType": "Complaint",
            "complaint": {
                "complainedRecipients": [{"emailAddress": "richard@example.com"}],
                "timestamp": "2016-01-27T14:59:38.237Z",
                "feedbackId": "0000013786031775-fea503bc-7497-49e1-881b-a0379bb037d3-000000",
            },
            "mail": _aws_mail(AWS_COMPLAINT_MESSAGE, THREE),
        },
        _three(AWS_COMPLAINT_MESSAGE, richard=(SUBMITTED, ("complained_at",))),
        (("complained", None, "richard@example.com"),),
        {"richard@example.com": "complaint"},
    ),
    # SES Developer Guide, "Delivery notification"
    Case(
        "aws delivery",
        "SES Developer Guide",
        {
            "notificationType": "Delivery",
            "mail": _aws_mail(
                "0000014644fe5ef6-9a483358-9170-4cb4-a269-f5dcdf415321-000000",
                ["jane@example.com"],
            ),
            "delivery": {
                "timestamp": "2016-01-27T14:59:38.237Z",
                "recipients": ["jane@example.com"],
                "processingTimeMillis": 546,
                "reportingMTA": "a8-70.smtp-out.amazonses.com",
                "smtpResponse": "250 ok:  Message 64111812 accepted",
                "remoteMtaIp": "127.0.2.0",
            },
        },
        (
            Intent(
                "jane@example.com",
                "0000014644fe5ef6-9a483358-9170-4cb4-a269-f5dcdf415321-000000",
                status=SUBMITTED,
                facts=("delivered_at",),
            ),
        ),  # fmt: skip
        (("delivered", None, "jane@example.com"),),
    ),
]
