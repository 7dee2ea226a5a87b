"""Each native HTTP provider's answer table, row by row, through ``classify()``.

The rows follow each provider's documented answers:
Postmark https://postmarkapp.com/developer/api/overview#error-codes (HTTP statuses
and ``ErrorCode``), Mailgun https://documentation.mailgun.com/docs/mailgun/quickstart-guide/responses,
SendGrid https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors,
SES v2 the error shapes of ``SendEmail`` in botocore's ``data/sesv2/2019-09-27/service-2.json``
and the common errors at https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html.
"""

from __future__ import annotations

import pytest

from console.core.blame import MESSAGE, RECIPIENT, SESSION, THROTTLING
from console.core.classify import classify
from console.core.classify_http import MALFORMED_ANSWER
from console.core.provider_tables import MAILGUN, POSTMARK, SENDGRID, SES, TABLES
from console.core.send_result import SendResult
from console.vocabulary import (
    ACCEPTED,
    AMBIGUOUS,
    CLAIMED,
    CONNECTING,
    DATA_SENT,
    PERMANENT,
    REPLY_READ,
    TRANSIENT,
)


def answer(protocol, code, error_code=None, stage=REPLY_READ, retry_after=None, honoured=False):
    said = f"{error_code}: said so" if error_code else "said so"
    return SendResult(
        stage=stage,
        protocol=protocol,
        code=code,
        error_type=error_code,
        reply_text=said if code is not None else None,
        error=said if code is None else None,
        retry_after_seconds=retry_after,
        idempotency_honoured=honoured,
    )


PM, MG, SG, AWS = "http/postmark", "http/mailgun", "http/sendgrid", "http/ses"

# (row, result, outcome, blamed, alert)
ROWS = [
    # Postmark: HTTP status, and the ErrorCode of its 422 (or 200) body
    ("pm 200", answer(PM, 200), ACCEPTED, None, False),
    ("pm 200 strange body", answer(PM, 200, MALFORMED_ANSWER), AMBIGUOUS, None, False),
    ("pm 200 with ErrorCode 406", answer(PM, 200, "406"), PERMANENT, RECIPIENT, False),
    ("pm 401", answer(PM, 401), TRANSIENT, SESSION, True),
    ("pm ErrorCode 10", answer(PM, 422, "10"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 100", answer(PM, 422, "100"), TRANSIENT, None, False),
    ("pm ErrorCode 300", answer(PM, 422, "300"), PERMANENT, MESSAGE, False),
    ("pm ErrorCode 400", answer(PM, 422, "400"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 401", answer(PM, 422, "401"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 402", answer(PM, 422, "402"), PERMANENT, MESSAGE, True),
    ("pm ErrorCode 403", answer(PM, 422, "403"), PERMANENT, MESSAGE, True),
    ("pm ErrorCode 405", answer(PM, 422, "405"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 406", answer(PM, 422, "406"), PERMANENT, RECIPIENT, False),
    ("pm ErrorCode 409", answer(PM, 422, "409"), PERMANENT, MESSAGE, True),
    ("pm ErrorCode 412", answer(PM, 422, "412"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 413", answer(PM, 422, "413"), TRANSIENT, SESSION, True),
    ("pm ErrorCode 429", answer(PM, 422, "429"), TRANSIENT, THROTTLING, False),
    ("pm other ErrorCode", answer(PM, 422, "9999"), PERMANENT, None, False),
    ("pm 413", answer(PM, 413), PERMANENT, MESSAGE, False),
    ("pm 415", answer(PM, 415), PERMANENT, MESSAGE, True),
    ("pm 429", answer(PM, 429), TRANSIENT, THROTTLING, False),
    ("pm 500", answer(PM, 500), AMBIGUOUS, None, False),
    ("pm 503", answer(PM, 503), TRANSIENT, None, False),
    # Mailgun: the HTTP status says it all
    ("mg 200", answer(MG, 200), ACCEPTED, None, False),
    ("mg 200 strange body", answer(MG, 200, MALFORMED_ANSWER), AMBIGUOUS, None, False),
    ("mg 400", answer(MG, 400), PERMANENT, MESSAGE, False),
    ("mg 401", answer(MG, 401), TRANSIENT, SESSION, True),
    ("mg 402", answer(MG, 402), PERMANENT, None, True),
    ("mg 403", answer(MG, 403), TRANSIENT, SESSION, True),
    ("mg 404", answer(MG, 404), TRANSIENT, SESSION, True),
    ("mg 413", answer(MG, 413), PERMANENT, MESSAGE, False),
    ("mg 429", answer(MG, 429), TRANSIENT, THROTTLING, False),
    ("mg 500", answer(MG, 500), AMBIGUOUS, None, False),
    ("mg 502", answer(MG, 502), TRANSIENT, None, False),
    ("mg 503", answer(MG, 503), TRANSIENT, None, False),
    ("mg 504", answer(MG, 504), TRANSIENT, None, False),
    # SendGrid
    ("sg 202", answer(SG, 202), ACCEPTED, None, False),
    ("sg 202 without X-Message-Id", answer(SG, 202, MALFORMED_ANSWER), AMBIGUOUS, None, False),
    ("sg 400", answer(SG, 400), PERMANENT, MESSAGE, False),
    ("sg 401", answer(SG, 401), TRANSIENT, SESSION, True),
    ("sg 403", answer(SG, 403), TRANSIENT, SESSION, True),
    ("sg 406", answer(SG, 406), PERMANENT, MESSAGE, True),
    ("sg 413", answer(SG, 413), PERMANENT, MESSAGE, False),
    ("sg 429", answer(SG, 429), TRANSIENT, THROTTLING, False),
    ("sg 451", answer(SG, 451), TRANSIENT, SESSION, True),
    ("sg 500", answer(SG, 500), AMBIGUOUS, None, False),
    ("sg 503", answer(SG, 503), TRANSIENT, None, False),
    # SES v2: the error's type name, whatever the status
    ("ses 200", answer(AWS, 200), ACCEPTED, None, False),
    ("ses 200 strange body", answer(AWS, 200, MALFORMED_ANSWER), AMBIGUOUS, None, False),
    ("ses MessageRejected", answer(AWS, 400, "MessageRejected"), PERMANENT, MESSAGE, False),
    ("ses BadRequest", answer(AWS, 400, "BadRequestException"), PERMANENT, MESSAGE, False),
    (
        "ses MailFrom",
        answer(AWS, 400, "MailFromDomainNotVerifiedException"),
        TRANSIENT,
        SESSION,
        True,
    ),
    ("ses suspended", answer(AWS, 400, "AccountSuspendedException"), TRANSIENT, SESSION, True),
    ("ses paused", answer(AWS, 400, "SendingPausedException"), TRANSIENT, SESSION, True),
    ("ses not found", answer(AWS, 404, "NotFoundException"), TRANSIENT, SESSION, True),
    ("ses quota", answer(AWS, 400, "LimitExceededException"), TRANSIENT, THROTTLING, True),
    ("ses too many", answer(AWS, 429, "TooManyRequestsException"), TRANSIENT, THROTTLING, False),
    ("ses throttling", answer(AWS, 400, "ThrottlingException"), TRANSIENT, THROTTLING, False),
    ("ses access denied", answer(AWS, 403, "AccessDeniedException"), TRANSIENT, SESSION, True),
    ("ses bad key", answer(AWS, 403, "UnrecognizedClientException"), TRANSIENT, SESSION, True),
    ("ses bad token", answer(AWS, 403, "InvalidClientTokenId"), TRANSIENT, SESSION, True),
    ("ses signature", answer(AWS, 403, "SignatureDoesNotMatch"), TRANSIENT, SESSION, True),
    ("ses signature parts", answer(AWS, 400, "IncompleteSignature"), TRANSIENT, SESSION, True),
    ("ses expired", answer(AWS, 403, "ExpiredTokenException"), TRANSIENT, SESSION, True),
    ("ses internal", answer(AWS, 500, "InternalFailure"), AMBIGUOUS, None, False),
    ("ses unavailable", answer(AWS, 503, "ServiceUnavailable"), TRANSIENT, None, False),
    ("ses 500 no type", answer(AWS, 500), AMBIGUOUS, None, False),
    ("ses other 4xx", answer(AWS, 400, "SomethingNew"), PERMANENT, None, True),
    (
        "ses no credentials",
        answer(AWS, None, "NoCredentialsError", stage=CLAIMED),
        TRANSIENT,
        SESSION,
        True,
    ),
]


@pytest.mark.parametrize(
    "result, expected, blamed, alert", [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_provider_table_row(result, expected, blamed, alert):
    verdict = classify(result)
    assert (verdict.outcome, verdict.blamed, verdict.alert) == (expected, blamed, alert)
    assert verdict.reason and "said so" in verdict.reason


@pytest.mark.parametrize("protocol", [PM, MG, SG, AWS])
def test_no_answer_after_the_request_is_ambiguous_and_before_it_transient(protocol):
    late = SendResult(stage=DATA_SENT, protocol=protocol, error_type="ReadTimeout", error="x")
    early = SendResult(stage=CONNECTING, protocol=protocol, error_type="ConnectError", error="x")
    assert classify(late).outcome == AMBIGUOUS
    assert classify(early).outcome == TRANSIENT


def test_transient_rows_carry_retry_after_and_ambiguous_rows_do_not():
    throttled = classify(answer(MG, 429, retry_after=12.0))
    unknown = classify(answer(MG, 500, retry_after=12.0))
    assert throttled.retry_after_seconds == 12.0
    assert unknown.retry_after_seconds is None


def test_an_unknown_outcome_is_transient_when_the_key_is_honoured():
    verdict = classify(answer(PM, 500, honoured=True))
    assert verdict.outcome == TRANSIENT and "idempotency key" in verdict.reason


def test_each_table_is_keyed_by_its_protocol_and_names_each_outcome():
    assert TABLES == {PM: POSTMARK, MG: MAILGUN, SG: SENDGRID, AWS: SES}
    for table in TABLES.values():
        outcomes = {row.outcome for row in table.values()}
        assert outcomes == {ACCEPTED, TRANSIENT, PERMANENT, AMBIGUOUS}
        assert all(row.summary for row in table.values())
