"""A claimed intent made ready for a transport: the stored template rendered, bytes on demand."""

from __future__ import annotations

import datetime as dt

from console.core.classify import RENDER_ERROR
from console.core.send_result import SendResult
from console.mail.catalog import TemplateCatalog
from console.mail.serialize import serialize_message
from console.mail.template_settings import TemplateError
from console.store.claims import Claim
from console.transports.base import OutgoingEmail
from console.vocabulary import CLAIMED


def compose(
    claim: Claim,
    catalog: TemplateCatalog,
    *,
    mail_from: str,
    envelope_from: str,
    date: dt.datetime,
) -> OutgoingEmail | SendResult:
    """Render the stored template and params; a failure is a result, not an exception."""
    intent = claim.intent
    try:
        parts = catalog.render(intent.template, intent.template_version, intent.params or {})
    except (TemplateError, OSError) as error:
        return SendResult(stage=CLAIMED, error=str(error)[:500], error_type=RENDER_ERROR)

    def as_bytes() -> bytes:
        return serialize_message(
            mail_from=mail_from,
            recipient=intent.recipient,
            message_id=intent.message_id,
            parts=parts,
            date=date,
        )

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
