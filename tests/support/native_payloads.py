"""The native providers' webhook payloads, as their sources publish them (one module each)."""

from __future__ import annotations

from tests.support.provider_payloads.mailgun import mailgun
from tests.support.provider_payloads.postmark import postmark
from tests.support.provider_payloads.resend import SVIX_VECTOR, resend
from tests.support.provider_payloads.sendgrid import SENDGRID_BATCH, SENDGRID_VECTOR, sendgrid_batch

__all__ = [
    "SENDGRID_BATCH",
    "SENDGRID_VECTOR",
    "SVIX_VECTOR",
    "mailgun",
    "postmark",
    "resend",
    "sendgrid_batch",
]
