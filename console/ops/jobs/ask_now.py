"""An operator's "Ask <provider> now" on one ambiguous intent: the job's answer, at once.

The provider is asked as the ``reconcile`` job asks it, and its answer does what
the job's would (``provider_asking.decide``): found settles the intent; not found
after the provider's horizon holds it with a note or resends it, as its template
says; not found before it, or a failed lookup, changes nothing. Each asking is
audited with the answer. No transaction is open while the provider is asked.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.config import Settings
from console.core.asking import FAILED, FOUND, HOLD_NOTED, RESEND_NOW
from console.mail.catalog import TemplateCatalog
from console.models import utcnow
from console.ops.jobs.provider_asking import AskReport, apply_answer, decide, not_found_words
from console.store import provider_lookups as events
from console.store import questions
from console.transports.lookup_core import Finding, ProviderLookup


@dataclasses.dataclass(frozen=True)
class Asked:
    """What the provider said, and one sentence for the operator."""

    said: str  # console.core.asking: FOUND, NOT_FOUND or FAILED
    words: str

    @property
    def failed(self) -> bool:
        return self.said == FAILED


def ask_now(
    session: Session,
    settings: Settings,
    lookup: ProviderLookup,
    catalog: TemplateCatalog,
    intent_id: int,
    *,
    actor: str,
    clock: Callable[[], dt.datetime] = utcnow,
) -> Asked:
    """Ask about one intent and write what the answer decides; the caller commits.

    StaleAction when the intent is no longer ambiguous.
    """
    question = questions.question_for(session, intent_id)
    session.rollback()  # nothing written yet: no transaction while the provider answers
    finding = lookup.ask(question)
    now = clock()
    action = decide(finding, question, settings, catalog, now)
    report = AskReport(asked=1)
    apply_answer(session, lookup.provider, question, finding, action, report, actor=actor)
    details = {"provider": lookup.provider, "answer": finding.said, "detail": finding.detail}
    events.audit_asking(session, question, actor=actor, details=details, now=now)
    return Asked(finding.said, _words(lookup.provider, question, finding, action, report))


def _words(provider: str, question, finding: Finding, action: str, report: AskReport) -> str:
    if finding.said == FOUND:
        return f"Settled by asking {provider}: it has the message."
    if finding.unanswered:
        return (
            f"No answer yet from {provider} ({finding.detail}); nothing changed. "
            "The reconcile job asks again."
        )
    if finding.said == FAILED:
        return f"{provider} could not be asked ({finding.detail}); nothing changed."
    if action == RESEND_NOW and report.resent:
        return f"{not_found_words(provider, question)}: resent (same Message-ID and key)."
    if action == RESEND_NOW:
        return f"{not_found_words(provider, question)}; it changed meanwhile: nothing was done."
    if action == HOLD_NOTED:
        return f"{not_found_words(provider, question)}: it stays ambiguous for you to decide."
    return (
        f"{provider} has no record of it yet; it may still be indexing it, and the "
        "reconcile job asks again. Nothing changed."
    )
