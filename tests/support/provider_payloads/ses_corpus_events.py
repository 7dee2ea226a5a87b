"""More public SES notifications: the SES Developer Guide's event publishing examples.

See ``ses_corpus`` for the case format; each case names its source.
"""

from __future__ import annotations

from tests.support.provider_payloads.ses_corpus import (
    FAILED,
    SUBMITTED,
    Case,
    _event_mail,
    _one,
)

CASES = [
    # SES Developer Guide, event publishing "Send record"
    Case(
        "aws send event",
        "SES Developer Guide",
        {"eventType": "Send", "mail": _event_mail(), "send": {}},
        _one(SUBMITTED),
        (("accepted", None, "recipient@example.com"),),
        occurred_at="2017-08-05T00:41:02.669Z",
    ),  # fmt: skip
    # SES Developer Guide, event publishing "Reject record"
    Case(
        "aws reject event",
        "SES Developer Guide",
        {"eventType": "Reject", "mail": _event_mail(), "reject": {"reason": "Bad content"}},
        _one(FAILED, "rejected_at"),
        (("rejected", None, "recipient@example.com"),),
    ),  # fmt: skip
    # SES Developer Guide, event publishing "Rendering Failure record"
    Case(
        "aws rendering failure event",
        "SES Developer Guide",
        {
            "eventType": "Rendering Failure",
            "mail": _event_mail(),
            "failure": {
                "errorMessage": "Attribute 'attributeName' is not present in the rendering data.",
                "templateName": "MyTemplate",
            },
        },
        _one(FAILED, "rejected_at"),
        (("rejected", None, "recipient@example.com"),),
    ),  # fmt: skip
    # SES Developer Guide, event publishing "DeliveryDelay record"
    Case(
        "aws delivery delay event",
        "SES Developer Guide",
        {
            "eventType": "DeliveryDelay",
            "mail": _event_mail(),
            "deliveryDelay": {
                "timestamp": "2020-06-16T00:25:40.095Z",
                "delayType": "TransientCommunicationFailure",
                "expirationTime": "2020-06-16T00:25:40.914Z",
                "delayedRecipients": [
                    {
                        "emailAddress": "recipient@example.com",
                        "status": "4.4.1",
                        "diagnosticCode": "smtp; 421 4.4.1 Unable to connect to remote host",
                    }
                ],
            },
        },
        _one(SUBMITTED, "delayed_at"),
        (("delayed", None, "recipient@example.com"),),
        occurred_at="2020-06-16T00:25:40.095Z",
    ),  # fmt: skip
    # SES Developer Guide, event publishing "Subscription record"
    Case(
        "aws subscription event",
        "SES Developer Guide",
        {
            "eventType": "Subscription",
            "mail": _event_mail(),
            "subscription": {
                "contactList": "ContactListName",
                "timestamp": "2022-01-12T01:00:14.340Z",
                "source": "UnsubscribeHeader",
                "newTopicPreferences": {"unsubscribeAll": True},
                "oldTopicPreferences": {"unsubscribeAll": False},
            },
        },
        _one("ambiguous"),
        (("subscription", None, "recipient@example.com"),),
        occurred_at="2022-01-12T01:00:14.340Z",
    ),  # fmt: skip
    # SES Developer Guide, "Bounce object": bounceSubType OnAccountSuppressionList
    Case(
        "aws account suppression bounce",
        "SES Developer Guide",
        {
            "notificationType": "Bounce",
            "mail": _event_mail(),
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "OnAccountSuppressionList",
                "bouncedRecipients": [
                    {
                        "emailAddress": "recipient@example.com",
                        "action": "failed",
                        "status": "5.1.1",
                        "diagnosticCode": "Amazon SES did not send the "
                        "message to this address because it is on the "
                        "suppression list for your account.",
                    }
                ],
                "timestamp": "2017-08-05T00:41:02.900Z",
                "reportingMTA": "dns; amazonses.com",
                "feedbackId": "0100015dca4b4b3a-account-suppressed",
            },
        },
        _one(FAILED, "rejected_at"),
        (("rejected", None, "recipient@example.com"),),
        {"recipient@example.com": "ses-account"},
    ),  # fmt: skip
    # SES Developer Guide, "Complaint object": complaintSubType OnAccountSuppressionList
    Case(
        "aws account suppression complaint",
        "SES Developer Guide",
        {
            "eventType": "Complaint",
            "mail": _event_mail(),
            "complaint": {
                "complaintSubType": "OnAccountSuppressionList",
                "complainedRecipients": [{"emailAddress": "recipient@example.com"}],
                "timestamp": "2017-08-05T00:41:03.000Z",
                "feedbackId": "0100015dca4b4b3a-account-complaint",
            },
        },
        _one(FAILED, "rejected_at"),
        (("rejected", None, "recipient@example.com"),),
        {"recipient@example.com": "ses-account"},
    ),  # fmt: skip
    # SES Developer Guide, "Complaint object": complaintFeedbackType not-spam (RFC 5965 types)
    Case(
        "aws not-spam feedback",
        "SES Developer Guide",
        {
            "eventType": "Complaint",
            "mail": _event_mail(),
            "complaint": {
                "complainedRecipients": [{"emailAddress": "recipient@example.com"}],
                "complaintFeedbackType": "not-spam",
                "timestamp": "2017-08-05T00:45:00.000Z",
                "feedbackId": "0100-not-spam",
            },
        },
        _one(SUBMITTED),
        (("not_spam", None, "recipient@example.com"),),
    ),  # fmt: skip
]
