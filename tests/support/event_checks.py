"""Small helpers of the provider-event tests: an intent to match, and what was stored."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import select, update

from console.models import AuditEntry, Intent, ProviderEvent, Suppression
from console.outbox import enqueue
from console.vocabulary import SUBMITTED
from tests.support.provider_fixtures import sns_signer


def make_intent(
    session_factory, *, to="ada@example.com", status=SUBMITTED, provider_id=None, message_id=None
):
    """Enqueue an intent to `to` and put it in `status` with `provider_id`; return its id."""
    with session_factory() as session:
        intent = enqueue(
            session, key=str(uuid.uuid4()), to=to, template="login-code", params={"code": "1"}
        )
        session.flush()
        session.execute(
            update(Intent)
            .where(Intent.id == intent.id)
            .values(status=status, provider_message_id=provider_id)
        )
        if message_id:  # as if the provider reported our own Message-ID
            session.execute(
                update(Intent).where(Intent.id == intent.id).values(message_id=message_id)
            )
        session.commit()
        return intent.id


def load_intent(session_factory, intent_id) -> Intent:
    with session_factory() as session:
        return session.get(Intent, intent_id)


def all_events(session_factory) -> list[ProviderEvent]:
    with session_factory() as session:
        return list(session.scalars(select(ProviderEvent).order_by(ProviderEvent.id)))


def suppression_map(session_factory) -> dict[str, Suppression]:
    with session_factory() as session:
        return {s.recipient: s for s in session.scalars(select(Suppression))}


def audit_of(session_factory, intent_id) -> list[AuditEntry]:
    with session_factory() as session:
        query = select(AuditEntry).where(AuditEntry.intent_id == intent_id)
        return list(session.scalars(query.order_by(AuditEntry.id)))


def post_sns(client, ses_message, *, expect: int = 200, **signing) -> dict:
    """POST `ses_message` to /webhooks/ses in a signed SNS notification; return the reply."""
    message = sns_signer().notification(ses_message, **signing)
    response = client.post("/webhooks/ses", data=json.dumps(message))
    assert response.status_code == expect, response.get_json()
    return response.get_json()
