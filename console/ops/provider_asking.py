"""Settle ambiguous sends by asking the provider: the ``reconcile`` job of ``OpsJobs``.

Every ``CONSOLE_RECONCILE_SECONDS`` at most ``BATCH`` ambiguous intents are
looked up, one request every ``ASK_INTERVAL_SECONDS`` at most, so the job never
competes with sending; no transaction is open while the provider is asked.
Postmark (its message search) and Mailgun (its event log) can answer; Resend
deduplicates a retry by its idempotency key instead, and SES and SendGrid's
send APIs have no lookup by our reference here: their events settle a send.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from console.config import Settings
from console.core.asking import (
    HOLD_NOTED,
    LEAVE,
    RECORD,
    RESEND_NOW,
    Question,
    after_asking,
)
from console.mail.catalog import TemplateCatalog
from console.mail.template_settings import TemplateError
from console.models import utcnow
from console.store import provider_lookups
from console.store.actions import ActionRefused
from console.transports.lookup_core import Finding, ProviderLookup
from console.vocabulary import HOLD

log = logging.getLogger(__name__)

BATCH = 20
ASK_INTERVAL_SECONDS = 0.2


@dataclasses.dataclass
class AskReport:
    """What one run did, by action."""

    asked: int = 0
    settled: int = 0
    resent: int = 0
    held: int = 0
    failed: int = 0


def lookup_for(settings: Settings) -> ProviderLookup | None:
    """The lookup of the provider the HTTP transport sends through, if it has one."""
    if settings.transport != "http" or settings.provider not in ("postmark", "mailgun"):
        return None
    key = settings.http_provider_key or ""
    if settings.provider == "postmark":
        from console.transports.postmark import POSTMARK_URL
        from console.transports.postmark_lookup import PostmarkLookupApi

        return ProviderLookup(PostmarkLookupApi(settings.http_provider_url or POSTMARK_URL, key))
    from console.transports.mailgun import MAILGUN_URL
    from console.transports.mailgun_lookup import MailgunLookupApi

    url = settings.http_provider_url or MAILGUN_URL
    return ProviderLookup(MailgunLookupApi(url, key, settings.mailgun_domain or ""))


def run(
    session_factory: sessionmaker[Session],
    settings: Settings,
    lookup: ProviderLookup,
    catalog: TemplateCatalog,
    *,
    clock: Callable[[], dt.datetime] = utcnow,
    sleep: Callable[[float], None] = time.sleep,
) -> AskReport:
    """Ask about one batch of ambiguous intents and write what each answer decides."""
    report = AskReport()
    with session_factory() as session:
        questions = provider_lookups.ambiguous_to_ask(session, limit=BATCH)
    for number, question in enumerate(questions):
        if number:
            sleep(ASK_INTERVAL_SECONDS)
        finding = lookup.ask(question)  # outside any transaction
        report.asked += 1
        action = after_asking(
            finding.said,
            seconds_since_attempt=(clock() - question.attempted_at).total_seconds(),
            horizon_seconds=settings.reconcile_after_seconds,
            ambiguity_policy=_policy(catalog, question.template),
        )
        with session_factory() as session:
            _apply(session, lookup.provider, question, finding, action, report)
            session.commit()
    return report


def _apply(
    session: Session,
    provider: str,
    question: Question,
    finding: Finding,
    action: str,
    report: AskReport,
) -> None:
    """Write what `action` decides for one intent (its transaction is the caller's)."""
    if action == LEAVE:
        report.failed += 1
        log.warning(
            "provider lookup failed",
            extra={"intent_id": question.intent_id, "provider": provider, "error": finding.detail},
        )
    elif action == RECORD:
        report.settled += provider_lookups.record_found(session, finding.events).matched
    elif action == RESEND_NOW:
        try:
            provider_lookups.resend_not_found(session, question, _not_found(provider, question))
            report.resent += 1
        except ActionRefused:  # it moved meanwhile (an event, an operator): nothing to do
            session.rollback()
    elif action == HOLD_NOTED:
        detail = _not_found(provider, question)
        report.held += provider_lookups.note_not_found(session, question, provider.lower(), detail)


def _not_found(provider: str, question: Question) -> str:
    attempted = f"{question.attempted_at:%Y-%m-%d %H:%M} UTC"
    return f"{provider} has no record of it (the attempt of {attempted})"


def _policy(catalog: TemplateCatalog, template: str) -> str:
    try:
        return catalog.settings(template).ambiguity_policy
    except TemplateError:
        return HOLD
