"""One answer table for each native HTTP provider, keyed by the transport's protocol. Pure.

Keys are ``(HTTP status, provider error code)`` (``None``: any); see
``console.core.provider_replies`` for the lookup. Where a refusal is of our
account, key, sender or configuration (the same for every message), the row
blames the session: the worker pauses the lane and alerts instead of failing
intents one by one. None of these four providers deduplicates a retry, so an
answer that may hide an accepted message is ambiguous.

Sources: Postmark https://postmarkapp.com/developer/api/overview (HTTP response
codes, API error codes); Mailgun
https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses;
SendGrid https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors
and https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send;
SES v2 the ``SendEmail`` errors of botocore's ``data/sesv2/2019-09-27/service-2.json``
and https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html.
"""

from __future__ import annotations

from console.core.blame import MESSAGE, RECIPIENT, SESSION, THROTTLING
from console.core.classify_http import MALFORMED_ANSWER
from console.core.provider_replies import Row, Table
from console.vocabulary import ACCEPTED, AMBIGUOUS, PERMANENT, TRANSIENT

_STRANGE = Row(AMBIGUOUS, "a success status without the provider's documented answer")
_THROTTLED = Row(TRANSIENT, "throttled: the account's sending rate was exceeded", THROTTLING)
_MAYBE_SENT = Row(AMBIGUOUS, "provider error; the provider may have it")
_UNAVAILABLE = Row(TRANSIENT, "the provider is unavailable")
_TOO_LARGE = Row(PERMANENT, "the message is larger than the provider accepts", MESSAGE)


def _ours(summary: str) -> Row:
    """A refusal of our key, account, sender or configuration: pause the lane, alert."""
    return Row(TRANSIENT, summary, SESSION, alert=True)


def _our_request(summary: str) -> Row:
    """A request the provider cannot read: our fault, the same on a retry."""
    return Row(PERMANENT, summary, MESSAGE, alert=True)


POSTMARK: Table = {
    (200, None): Row(ACCEPTED, "accepted"),
    (None, MALFORMED_ANSWER): _STRANGE,
    (401, None): _ours("Postmark refused the server token"),
    (None, "10"): _ours("Postmark: bad or missing server token"),
    (None, "100"): Row(TRANSIENT, "Postmark is in maintenance"),
    (None, "300"): Row(PERMANENT, "Postmark: invalid email request", MESSAGE),
    (None, "400"): _ours("Postmark: sender signature not found"),
    (None, "401"): _ours("Postmark: sender signature not confirmed"),
    (None, "402"): _our_request("Postmark: invalid JSON"),
    (None, "403"): _our_request("Postmark: incompatible JSON"),
    (None, "405"): _ours("Postmark: not allowed to send (account out of credits)"),
    (None, "406"): Row(PERMANENT, "Postmark: inactive recipient", RECIPIENT),
    (None, "409"): _our_request("Postmark: JSON required"),
    (None, "412"): _ours("Postmark: account pending approval"),
    (None, "413"): _ours("Postmark: account may not send"),
    (None, "429"): _THROTTLED,
    (413, None): _TOO_LARGE,
    (415, None): _our_request("Postmark: unsupported media type"),
    (422, None): Row(PERMANENT, "Postmark refused the message"),
    (429, None): _THROTTLED,
    (500, None): _MAYBE_SENT,
    (503, None): _UNAVAILABLE,
}

MAILGUN: Table = {
    (200, None): Row(ACCEPTED, "accepted"),
    (None, MALFORMED_ANSWER): _STRANGE,
    (400, None): Row(PERMANENT, "Mailgun refused the message (a parameter)", MESSAGE),
    (401, None): _ours("Mailgun refused the API key"),
    (402, None): Row(
        PERMANENT, "Mailgun: the parameters were valid, the request failed", alert=True
    ),
    (403, None): _ours("Mailgun denied access (key, domain or account)"),
    (404, None): _ours("Mailgun: domain not found (check the domain and the region)"),
    (413, None): _TOO_LARGE,
    (429, None): _THROTTLED,
    (500, None): _MAYBE_SENT,
    (502, None): _UNAVAILABLE,
    (503, None): _UNAVAILABLE,
    (504, None): _UNAVAILABLE,
}

SENDGRID: Table = {
    (202, None): Row(ACCEPTED, "accepted"),
    (None, MALFORMED_ANSWER): _STRANGE,
    (400, None): Row(PERMANENT, "SendGrid refused the message", MESSAGE),
    (401, None): _ours("SendGrid refused the API key"),
    (403, None): _ours("SendGrid forbade it (key permission or unverified sender)"),
    (406, None): _our_request("SendGrid: missing Accept header"),
    (413, None): _TOO_LARGE,
    (429, None): _THROTTLED,
    (451, None): _ours("SendGrid: data residency (use the region's API URL)"),
    (500, None): _MAYBE_SENT,
    (503, None): _UNAVAILABLE,
}

SES: Table = {
    (200, None): Row(ACCEPTED, "accepted"),
    (None, MALFORMED_ANSWER): _STRANGE,
    (None, "MessageRejected"): Row(PERMANENT, "SES rejected the message", MESSAGE),
    (None, "BadRequestException"): Row(PERMANENT, "SES: bad request", MESSAGE),
    (None, "MailFromDomainNotVerifiedException"): _ours("SES: MAIL FROM domain not verified"),
    (None, "AccountSuspendedException"): _ours("SES: sending is suspended for the account"),
    (None, "SendingPausedException"): _ours("SES: sending is paused"),
    (None, "NotFoundException"): _ours("SES: configuration set or identity not found"),
    (None, "LimitExceededException"): Row(
        TRANSIENT, "SES: sending quota reached", THROTTLING, alert=True
    ),
    (None, "TooManyRequestsException"): _THROTTLED,
    (None, "ThrottlingException"): _THROTTLED,
    (None, "AccessDeniedException"): _ours("SES: access denied to the credentials"),
    (None, "UnrecognizedClientException"): _ours("SES: unknown access key"),
    (None, "InvalidClientTokenId"): _ours("SES: unknown access key"),
    (None, "SignatureDoesNotMatch"): _ours("SES: the request signature does not match"),
    (None, "IncompleteSignature"): _ours("SES: the request signature is incomplete"),
    (None, "ExpiredTokenException"): _ours("SES: the credentials expired"),
    (None, "NoCredentialsError"): _ours("SES: no AWS credentials found"),
    (None, "InternalFailure"): _MAYBE_SENT,
    (None, "ServiceUnavailable"): _UNAVAILABLE,
    (400, None): Row(
        PERMANENT, "SES refused the request (an error it does not document)", alert=True
    ),
    (429, None): _THROTTLED,
    (500, None): _MAYBE_SENT,
    (503, None): _UNAVAILABLE,
}

TABLES: dict[str, Table] = {
    "http/postmark": POSTMARK,
    "http/mailgun": MAILGUN,
    "http/sendgrid": SENDGRID,
    "http/ses": SES,
}
