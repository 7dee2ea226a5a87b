"""Amazon SES v2's send API: ``SendEmail``, ``POST {base_url}/v2/email/outbound-emails``.

The JSON body is SES's ``Simple`` content (subject, text, HTML), our reference
in ``EmailTags`` (SES events carry it in ``mail.tags``) and the configuration
set, if one is named (its event destination is what publishes those events).
The request is signed with AWS Signature Version 4 by botocore's own signer,
with the credentials and region the AWS SDK finds (environment, shared files,
an instance or task role): botocore is the optional extra ``ses``. SES answers
``{"MessageId"}``; a refusal names its type in the ``x-amzn-ErrorType`` header
or the body's ``__type``/``code`` (botocore's data/sesv2/2019-09-27/service-2.json
and its RestJSONParser). SES sets its own Message-ID header and takes no
idempotency key.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

from console.core.setting_values import ConfigError
from console.events.metadata import REFERENCE_KEY, reference_for
from console.transports.answers import (
    ProviderAnswer,
    Reply,
    accepted_or_malformed,
    body_text,
    clean_code,
    clean_id,
    clean_text,
    is_success,
    json_object,
)
from console.transports.base import OutgoingEmail
from console.transports.http_core import ProviderRequest

EXTRA = "outbox-console[ses]"
MISSING_BOTOCORE = (
    f"CONSOLE_PROVIDER=ses over CONSOLE_TRANSPORT=http signs with botocore, which is not "
    f"installed: pip install '{EXTRA}'"
)
SIGNING_NAME = "ses"
_UTF8 = "UTF-8"


def botocore_missing() -> str | None:
    """The error to show when botocore (the extra ``ses``) is not installed, else None."""
    return None if importlib.util.find_spec("botocore") is not None else MISSING_BOTOCORE


def ses_url(region: str) -> str:
    return f"https://email.{region}.amazonaws.com"


def sdk_credentials() -> tuple[str, Any]:
    """The region and credentials the AWS SDK finds; ConfigError when either is missing."""
    if botocore_missing():
        raise ConfigError(MISSING_BOTOCORE)
    import botocore.session

    session = botocore.session.get_session()
    region = session.get_config_variable("region") or os.environ.get("AWS_REGION")
    if not region:
        raise ConfigError("CONSOLE_PROVIDER=ses needs an AWS region: set AWS_REGION")
    credentials = session.get_credentials()
    if credentials is None:
        raise ConfigError("CONSOLE_PROVIDER=ses found no AWS credentials (AWS_ACCESS_KEY_ID, ...)")
    return region, credentials


class SesApi:
    """SES v2's SendEmail request, signed, and its answer."""

    protocol = "http/ses"
    honours_idempotency_keys = False

    def __init__(
        self, base_url: str, region: str, credentials: Any, configuration_set: str | None = None
    ) -> None:
        if botocore_missing():
            raise ConfigError(MISSING_BOTOCORE)
        self.endpoint = base_url.rstrip("/") + "/v2/email/outbound-emails"
        self.region = region
        self._credentials = credentials  # botocore Credentials (maybe refreshable)
        self.configuration_set = configuration_set

    def payload(self, email: OutgoingEmail) -> dict[str, Any]:
        body: dict[str, Any] = {"Text": {"Data": email.text, "Charset": _UTF8}}
        if email.html is not None:
            body["Html"] = {"Data": email.html, "Charset": _UTF8}
        payload: dict[str, Any] = {
            "FromEmailAddress": email.mail_from,
            "Destination": {"ToAddresses": [email.recipient]},
            "Content": {
                "Simple": {"Subject": {"Data": email.subject, "Charset": _UTF8}, "Body": body}
            },
            "EmailTags": [
                {"Name": REFERENCE_KEY, "Value": reference_for(email.intent_id, email.message_id)}
            ],
        }
        if self.configuration_set:
            payload["ConfigurationSetName"] = self.configuration_set
        return payload

    def request(self, email: OutgoingEmail) -> ProviderRequest:
        content = json.dumps(self.payload(email)).encode()
        return ProviderRequest(self.endpoint, self._signed_headers(content), content)

    def _signed_headers(self, content: bytes) -> dict[str, str]:
        """The headers of the request with botocore's SigV4 signature added."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        request = AWSRequest(method="POST", url=self.endpoint, data=content, headers=headers)
        frozen = self._credentials.get_frozen_credentials()
        SigV4Auth(frozen, SIGNING_NAME, self.region).add_auth(request)
        return dict(request.headers.items())

    def answer(self, reply: Reply) -> ProviderAnswer:
        body = json_object(reply)
        if is_success(reply):
            return accepted_or_malformed(reply, clean_id((body or {}).get("MessageId")))
        message = clean_text(_either(body, "message", "Message")) if body else body_text(reply)
        return ProviderAnswer(error_code=_error_type(reply, body), message=message)


def _error_type(reply: Reply, body: dict[str, Any] | None) -> str | None:
    """The error's type: the x-amzn-ErrorType header, else the body's code or __type."""
    raw = reply.headers.get("x-amzn-ErrorType") or _either(body, "code", "Code", "__type")
    if not isinstance(raw, str):
        return None
    return clean_code(raw.split(":", 1)[0].rsplit("#", 1)[-1])


def _either(body: dict[str, Any] | None, *names: str) -> Any:
    return next((body[name] for name in names if body and name in body), None)
