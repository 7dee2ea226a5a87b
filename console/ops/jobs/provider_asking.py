"""Settle ambiguous sends by asking the provider: the ``reconcile`` job of ``OpsJobs``,
and an operator's "Ask <provider> now" on one intent.

Every ``CONSOLE_RECONCILE_SECONDS`` at most ``BATCH`` ambiguous intents are
looked up, one request every ``ASK_INTERVAL_SECONDS`` at most, so the job never
competes with sending; no transaction is open while the provider is asked.
Postmark (its message search), Mailgun (its event log) and SendGrid (its Email
Activity) can answer; Resend finds a message only by its own id, which an
ambiguous send lacks (a retry with the same idempotency key is its way), and
SES has no lookup: their events settle a send. Each lookup has one deadline;
a provider that gives no answer by it ends the run (the rest wait for the next
one), and so does the process's stop once the lookup in flight has its answer,
so stopping the process waits at most that deadline. Lookups that keep
failing raise an alert (``console.ops.alerts.lookups``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
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
    provider_that_answers,
)
from console.mail.catalog import TemplateCatalog
from console.mail.template_settings import TemplateError
from console.models import utcnow
from console.ops.alerts import lookups
from console.store import provider_lookups as events
from console.store import questions
from console.store.actions import ActionRefused
from console.transports.lookup_core import Finding, LookupApi, ProviderLookup
from console.vocabulary import HOLD

log = logging.getLogger(__name__)

BATCH = 20
ASK_INTERVAL_SECONDS = 0.2
LOOKUP_TIMEOUT_SECONDS = 10.0


@dataclasses.dataclass
class AskReport:
    """What one run did, by action."""

    asked: int = 0
    settled: int = 0
    resent: int = 0
    held: int = 0
    failed: int = 0


def lookup_for(
    settings: Settings, *, timeout_seconds: float = LOOKUP_TIMEOUT_SECONDS
) -> ProviderLookup | None:
    """The lookup of the provider the HTTP transport sends through, if it has one."""
    if provider_that_answers(settings.transport, settings.provider) is None:
        return None
    return ProviderLookup(_lookup_api(settings), timeout_seconds=timeout_seconds)


def _lookup_api(settings: Settings) -> LookupApi:
    key, url = settings.http_provider_key or "", settings.http_provider_url
    if settings.provider == "postmark":
        from console.transports.postmark import POSTMARK_URL
        from console.transports.postmark_lookup import PostmarkLookupApi

        return PostmarkLookupApi(url or POSTMARK_URL, key)
    if settings.provider == "sendgrid":
        from console.transports.sendgrid import SENDGRID_URL
        from console.transports.sendgrid_lookup import SendGridLookupApi

        return SendGridLookupApi(url or SENDGRID_URL, key)
    from console.transports.mailgun import MAILGUN_URL
    from console.transports.mailgun_lookup import MailgunLookupApi

    return MailgunLookupApi(url or MAILGUN_URL, key, settings.mailgun_domain or "")


def run(
    session_factory: sessionmaker[Session],
    settings: Settings,
    lookup: ProviderLookup,
    catalog: TemplateCatalog,
    *,
    clock: Callable[[], dt.datetime] = utcnow,
    sleep: Callable[[float], None] = time.sleep,
    stop: threading.Event | None = None,
) -> AskReport:
    """Ask about one batch of ambiguous intents and write what each answer decides; once
    `stop` is set, ask no further."""
    report = AskReport()
    with session_factory() as session:
        to_ask = questions.ambiguous_to_ask(session, limit=BATCH)
    for number, question in enumerate(to_ask):
        if number:
            sleep(ASK_INTERVAL_SECONDS)
        if stop is not None and stop.is_set():
            break
        finding = lookup.ask(question)  # outside any transaction
        report.asked += 1
        action = decide(finding, question, settings, catalog, clock())
        with session_factory() as session:
            apply_answer(session, lookup.provider, question, finding, action, report)
            session.commit()
        if finding.unanswered:
            break
    lookups.after_run(session_factory, settings, lookup, report.asked, clock())
    return report


def decide(
    finding: Finding,
    question: Question,
    settings: Settings,
    catalog: TemplateCatalog,
    now: dt.datetime,
) -> str:
    """The action the provider's answer about `question` calls for (console.core.asking)."""
    return after_asking(
        finding.said,
        seconds_since_attempt=(now - question.attempted_at).total_seconds(),
        horizon_seconds=settings.reconcile_after_seconds,
        ambiguity_policy=_policy(catalog, question.template),
    )


def apply_answer(
    session: Session,
    provider: str,
    question: Question,
    finding: Finding,
    action: str,
    report: AskReport,
    actor: str = events.ACTOR,
) -> None:
    """Write what `action` decides for one intent (its transaction is the caller's)."""
    if action == LEAVE:
        report.failed += 1
        log.warning(
            "provider lookup failed",
            extra={"intent_id": question.intent_id, "provider": provider, "error": finding.detail},
        )
    elif action == RECORD:
        report.settled += events.record_found(session, finding.events).matched
    elif action == RESEND_NOW:
        reason = not_found_words(provider, question)
        try:
            events.resend_not_found(session, question, reason, actor=actor)
            report.resent += 1
        except ActionRefused:  # it moved meanwhile (an event, an operator): nothing to do
            session.rollback()
    elif action == HOLD_NOTED:
        detail = not_found_words(provider, question)
        report.held += events.note_not_found(session, question, provider.lower(), detail)


def not_found_words(provider: str, question: Question) -> str:
    attempted = f"{question.attempted_at:%Y-%m-%d %H:%M} UTC"
    return f"{provider} has no record of it (the attempt of {attempted})"


def _policy(catalog: TemplateCatalog, template: str) -> str:
    try:
        return catalog.settings(template).ambiguity_policy
    except TemplateError:
        return HOLD
