"""A claimed intent made ready for a transport: the stored template rendered, bytes on demand.

Whatever wrote the row, nothing unsafe reaches a header or the envelope: the
recipient, the Message-ID, the rendered subject and the idempotency key are
checked here (``console.mail.header_checks``); a row that fails is a permanent
failure naming the field, and is never handed to the transport.
"""

from __future__ import annotations

import datetime as dt

from console.core.classify import RENDER_ERROR, UNSAFE_HEADER
from console.core.send_result import SendResult
from console.mail.catalog import TemplateCatalog
from console.mail.header_checks import UnsafeHeader, check_outgoing
from console.mail.serialize import serialize_message
from console.mail.template_settings import TemplateError
from console.store.claims import Claim
from console.store.json_values import params_problem
from console.transports.base import OutgoingEmail
from console.vocabulary import CLAIMED


def compose(
    claim: Claim,
    catalog: TemplateCatalog,
    *,
    mail_from: str,
    envelope_from: str,
    date: dt.datetime,
    provider: str | None = None,
) -> OutgoingEmail | SendResult:
    """Render the stored template and params, check the headers; a failure is a result.
    With `provider`, the bytes carry the intent's reference in its metadata header."""
    intent = claim.intent
    problem = params_problem(intent.params)
    if problem is not None:
        return SendResult(stage=CLAIMED, error=problem[:500], error_type=RENDER_ERROR)
    try:
        parts = catalog.render(intent.template, intent.template_version, intent.params or {})
    except (TemplateError, OSError) as error:
        return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=RENDER_ERROR)
    try:
        check_outgoing(
            recipient=intent.recipient,
            message_id=intent.message_id,
            subject=parts.subject,
            idempotency_key=intent.idempotency_key,
        )
    except UnsafeHeader as error:
        return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=UNSAFE_HEADER)

    serialized: list[bytes] = []  # built once, by whoever asks first

    def as_bytes() -> bytes:
        if not serialized:
            serialized.append(
                serialize_message(
                    mail_from=mail_from,
                    recipient=intent.recipient,
                    message_id=intent.message_id,
                    parts=parts,
                    date=date,
                    provider=provider,
                    intent_id=intent.id,
                )
            )
        return serialized[0]

    return OutgoingEmail(
        intent_id=intent.id,
        attempt_id=claim.attempt_id,
        message_id=intent.message_id,
        idempotency_key=intent.idempotency_key,
        mail_from=mail_from,
        envelope_from=envelope_from,
        recipient=intent.recipient,
        subject=parts.subject,
        text=parts.text,
        html=parts.html,
        created_at_epoch=intent.created_at.timestamp(),
        as_bytes=as_bytes,
    )
