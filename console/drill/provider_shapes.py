"""The send APIs of Resend, Postmark, Mailgun, SendGrid and SES v2 as their documentation
shows them: where each listens, whom it lets in, what it answers. Each source is named
beside its role.

A ``Role`` is played by a local HTTP server: the drill's (console.drill.provider_play)
and the test suite's (tests/support/provider_apis.py, which adds the lookup APIs).
``errors`` holds documented refusals by name; ``permanent`` names the one that refuses
this message for good (the provider's equivalent of an SMTP ``5yz``). Only Resend
deduplicates a retry by its ``Idempotency-Key`` (``honours_keys``).
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import json
import re
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

SES_REGION = "eu-west-1"
SES_ACCESS_KEY, SES_SECRET_KEY = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
MAILGUN_DOMAIN = "mg.example.com"


@dataclasses.dataclass(frozen=True)
class Canned:
    """One answer: status, headers and body."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


def as_json(status: int, body: Any, *headers: tuple[str, str]) -> Canned:
    return Canned(
        status, json.dumps(body).encode(), (("Content-Type", "application/json"), *headers)
    )


@dataclasses.dataclass
class Role:
    """One provider: where it listens, whom it lets in, what it answers."""

    name: str
    path: re.Pattern[str]
    authorised: Callable[[dict[str, str], str, bytes], bool]
    refused: Canned  # the answer to a request without valid credentials
    read: Callable[[dict[str, str], bytes], dict[str, Any]]  # the fields of a request
    accepted: Callable[[dict[str, Any]], tuple[str, Canned]]  # a new send: its id, the answer
    errors: dict[str, Canned]
    throttled: Canned
    permanent: str = ""  # the name in `errors` of a refusal of this message for good
    honours_keys: bool = False  # a repeated Idempotency-Key gets the first answer
    sends: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    lookup_path: re.Pattern[str] | None = None
    lookup: Callable[[dict[str, list[str]], list[dict[str, Any]]], Canned] | None = None


# Resend: https://resend.com/docs/api-reference/emails/send-email (POST /emails, bearer key,
# answer {"id"}), .../api-reference/errors ({"statusCode", "name", "message"}: 401
# missing_api_key, 403 invalid_api_key, 422 validation_error, 429 rate_limit_exceeded) and
# https://resend.com/docs/dashboard/emails/idempotency-keys (a repeated key: the first answer).
def resend_role(api_key: str) -> Role:
    def error(status: int, name: str, message: str, *headers: tuple[str, str]) -> Canned:
        return as_json(status, {"statusCode": status, "name": name, "message": message}, *headers)

    def accepted(fields: dict[str, Any]) -> tuple[str, Canned]:
        email_id = str(uuid.uuid4())
        return email_id, as_json(200, {"id": email_id})

    return Role(
        name="resend",
        path=re.compile(r"^/emails$"),
        authorised=lambda headers, url, body: headers.get("authorization") == f"Bearer {api_key}",
        refused=error(403, "invalid_api_key", "API key is invalid"),
        read=lambda headers, body: json.loads(body),
        accepted=accepted,
        errors={"validation-error": error(422, "validation_error", "Invalid `to` field.")},
        throttled=error(429, "rate_limit_exceeded", "Too many requests."),
        permanent="validation-error",
        honours_keys=True,
    )


# Postmark: https://postmarkapp.com/developer/api/email-api (send a single email: request
# headers, body fields, example response) and .../api/overview#error-codes (ErrorCode list).
def postmark_role(token: str) -> Role:
    def accepted(fields: dict[str, Any]) -> tuple[str, Canned]:
        message_id = str(uuid.uuid4())
        return message_id, as_json(
            200,
            {
                "To": fields.get("To"),
                "SubmittedAt": "2014-02-17T07:25:01.4178645-05:00",
                "MessageID": message_id,
                "ErrorCode": 0,
                "Message": "OK",
            },
        )

    inactive = (
        "You tried to send to recipient(s) that have been marked as inactive. Found inactive "
        "addresses: ada@example.com. Inactive recipients are ones that have generated a hard "
        "bounce, a spam complaint, or a manual suppression."
    )
    return Role(
        name="postmark",
        path=re.compile(r"^/email$"),
        authorised=lambda headers, url, body: headers.get("x-postmark-server-token") == token,
        refused=as_json(401, {"ErrorCode": 10, "Message": "Bad or missing API token"}),
        read=lambda headers, body: json.loads(body),
        accepted=accepted,
        errors={
            "inactive-recipient": as_json(422, {"ErrorCode": 406, "Message": inactive}),
            "invalid-request": as_json(422, {"ErrorCode": 300, "Message": "Invalid 'To' address"}),
            "out-of-credits": as_json(422, {"ErrorCode": 405, "Message": "Not allowed to send"}),
        },
        throttled=as_json(429, {"ErrorCode": 429, "Message": "Rate Limit Exceeded"}),
        permanent="invalid-request",
    )


# Mailgun: https://documentation.mailgun.com/docs/mailgun/api-reference/send/mailgun/messages
# (POST /v3/{domain}/messages, basic auth "api", form fields, "v:" variables, "h:" headers;
# response {"id", "message"}) and .../quickstart-guide/responses (error statuses).
def mailgun_role(api_key: str, domain: str = MAILGUN_DOMAIN) -> Role:
    expected = "Basic " + base64.b64encode(f"api:{api_key}".encode()).decode()

    def accepted(fields: dict[str, Any]) -> tuple[str, Canned]:
        message_id = fields.get("h:Message-Id") or f"<{uuid.uuid4().hex}@{domain}>"
        return message_id, as_json(200, {"id": message_id, "message": "Queued. Thank you."})

    return Role(
        name="mailgun",
        path=re.compile(rf"^/v3/{re.escape(domain)}/messages$"),
        authorised=lambda headers, url, body: headers.get("authorization") == expected,
        refused=Canned(401, b"Forbidden", (("Content-Type", "text/plain"),)),
        read=lambda headers, body: {
            k: v[0] if len(v) == 1 else v for k, v in parse_qs(body.decode()).items()
        },
        accepted=accepted,
        errors={
            "bad-parameter": as_json(400, {"message": "'to' parameter is not a valid address"}),
            "forbidden": as_json(403, {"message": f"Domain {domain} is not allowed to send"}),
        },
        throttled=as_json(429, {"message": "Too many requests"}),
        permanent="bad-parameter",
    )


# SendGrid: https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send (202 with
# an empty body and X-Message-Id; errors as {"errors": [{"message", "field", "help"}]}).
def sendgrid_role(api_key: str) -> Role:
    def accepted(fields: dict[str, Any]) -> tuple[str, Canned]:
        message_id = uuid.uuid4().hex[:22]
        return message_id, Canned(202, b"", (("X-Message-Id", message_id),))

    def errors(status: int, message: str, field: str | None) -> Canned:
        return as_json(status, {"errors": [{"message": message, "field": field, "help": None}]})

    unverified = "The from address does not match a verified Sender Identity."
    return Role(
        name="sendgrid",
        path=re.compile(r"^/v3/mail/send$"),
        authorised=lambda headers, url, body: headers.get("authorization") == f"Bearer {api_key}",
        refused=errors(
            401, "The provided authorization grant is invalid, expired, or revoked", None
        ),
        read=lambda headers, body: json.loads(body),
        accepted=accepted,
        errors={
            "bad-request": errors(400, "The from object must be provided", "from.email"),
            "unverified-sender": errors(403, unverified, "from"),
            "too-large": errors(413, "The JSON payload you have included is too large", None),
        },
        throttled=errors(429, "too many requests", None),
        permanent="bad-request",
    )


# SES v2: SendEmail of botocore's data/sesv2/2019-09-27/service-2.json (POST
# /v2/email/outbound-emails, JSON in and out, {"MessageId"}; errors named in the
# x-amzn-ErrorType header as botocore's RestJSONParser reads them), signed with SigV4.
def ses_role(access_key: str = SES_ACCESS_KEY, secret_key: str = SES_SECRET_KEY) -> Role:
    def accepted(fields: dict[str, Any]) -> tuple[str, Canned]:
        message_id = f"0102018c{uuid.uuid4().hex}-000000"
        return message_id, as_json(200, {"MessageId": message_id})

    def error(status: int, kind: str, message: str) -> Canned:
        return as_json(status, {"message": message}, ("x-amzn-ErrorType", f"{kind}:"))

    rejected = (
        "Email address is not verified. The following identities failed the check in "
        "region EU-WEST-1: ada@example.com"
    )
    return Role(
        name="ses",
        path=re.compile(r"^/v2/email/outbound-emails$"),
        authorised=lambda headers, url, body: sigv4_valid(
            headers, url, body, access_key, secret_key, SES_REGION
        ),
        refused=error(403, "SignatureDoesNotMatch", "The request signature does not match"),
        read=lambda headers, body: json.loads(body),
        accepted=accepted,
        errors={
            "message-rejected": error(400, "MessageRejected", rejected),
            "sending-paused": error(400, "SendingPausedException", "Sending is paused"),
        },
        throttled=error(429, "TooManyRequestsException", "Maximum sending rate exceeded."),
        permanent="message-rejected",
    )


_SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/ses/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def sigv4_valid(headers: dict[str, str], url: str, body: bytes, access_key, secret_key, region):
    """Whether the request is signed by these credentials, recomputed with botocore's signer."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    match = _SIGV4.fullmatch(headers.get("authorization", ""))
    if not match or (match["key"], match["region"]) != (access_key, region):
        return False
    signed = {name: headers.get(name, "") for name in match["signed"].split(";")}
    request = AWSRequest(method="POST", url=url, data=body, headers=signed)
    request.context["timestamp"] = headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(access_key, secret_key), "ses", region)
    string_to_sign = signer.string_to_sign(request, signer.canonical_request(request))
    expected = signer.signature(string_to_sign, request)
    return hmac.compare_digest(expected, match["signature"])
