"""What the worker decides at each step, from the stored facts of an intent and the core's rules.

At the claim (send it, or close it: expired, suppressed, ineligible), after an
attempt (where the outcome sends the intent), and at lease expiry (could the
silent worker have handed the message over?). The store only carries out.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from sqlalchemy.orm import Session

from console.core.lifecycle import (
    Decision,
    IntentFacts,
    RetryPolicy,
    TemplateRules,
    classify_lease_expiry,
    decide_after_attempt,
    decide_at_claim,
)
from console.core.outcomes import Classification
from console.core.send_result import handed_over
from console.mail.catalog import TemplateCatalog
from console.mail.template_settings import TemplateError
from console.store.claims import ExpiredLease
from console.store.json_values import params_problem
from console.store.statements import DueIntent
from console.vocabulary import PENDING, PERMANENT
from console.worker.eligibility import EligibilityPolicy

log = logging.getLogger("console.worker.loop")


class SendDecisions:
    """The worker's judgement: the catalog's template rules, retry policy and eligibility."""

    def __init__(
        self,
        catalog: TemplateCatalog,
        retry: RetryPolicy,
        eligibility: EligibilityPolicy,
        random: Callable[[], float],
    ) -> None:
        self.catalog = catalog
        self.retry = retry
        self.eligibility = eligibility
        self.random = random

    def facts(self, intent: DueIntent, attempts_made: int) -> IntentFacts:
        """The facts the core decides on; a template gone from the catalog gets default rules."""
        try:
            template = self.catalog.settings(intent.template)
            rules = TemplateRules(template.ambiguity_policy, template.max_age_seconds)
        except TemplateError:
            rules = TemplateRules()
        return IntentFacts(
            intent.created_at, intent.expires_at, attempts_made, rules, intent.attempts_granted
        )

    def at_claim(
        self, intent: DueIntent, suppressed: bool, session: Session, now: dt.datetime
    ) -> Decision | None:
        """Recheck at claim: expiry, suppression, then the application's eligibility check.

        None means send it; a decision says where it goes instead.
        """
        facts = self.facts(intent, attempts_made=intent.attempt_count)
        decision = decide_at_claim(facts, now, suppressed=suppressed, ineligible_reason=None)
        if decision is not None or params_problem(intent.params) is not None:
            return decision  # unreadable params: the attempt fails them, no check runs on them
        try:
            reason = self.eligibility.reason_not_to_send(intent, session)
        except Exception as error:  # noqa: BLE001 - the application's code: defer, do not cancel
            return self._defer_after_failed_check(intent, error, now)
        return decide_at_claim(facts, now, suppressed=False, ineligible_reason=reason)

    def _defer_after_failed_check(
        self, intent: DueIntent, error: Exception, now: dt.datetime
    ) -> Decision:
        log.error(
            "eligibility check failed: intent=%s error=%s",
            intent.id,
            type(error).__name__,
            extra=dict(intent_id=intent.id, error_type=type(error).__name__),
        )
        delay = dt.timedelta(seconds=self.retry.backoff.delay_seconds(1, self.random))
        return Decision(PENDING, f"eligibility check failed ({type(error).__name__})", now + delay)

    def suppressed_at_send(
        self, intent: DueIntent, now: dt.datetime
    ) -> tuple[Classification, Decision]:
        """A recipient suppressed between the claim and its turn: not sent, never retried."""
        classification = Classification(PERMANENT, "recipient suppressed before its turn to send")
        facts = self.facts(intent, attempts_made=intent.attempt_count)
        decision = decide_at_claim(facts, now, suppressed=True, ineligible_reason=None)
        return classification, decision

    def after_attempt(
        self,
        intent: DueIntent,
        attempt_number: int,
        classification: Classification,
        now: dt.datetime,
    ) -> Decision:
        """Where the outcome of attempt `attempt_number` sends the intent."""
        facts = self.facts(intent, attempts_made=attempt_number)
        return decide_after_attempt(classification, facts, now, self.retry, self.random)

    def at_lease_expiry(
        self, lease: ExpiredLease, now: dt.datetime
    ) -> tuple[Classification, Decision]:
        """Judge a silent worker's attempt by the stage it reached, then decide as after it."""
        classification = classify_lease_expiry(lease.stage, handed_over(lease.stage))
        decision = self.after_attempt(lease.intent, lease.intent.attempt_count, classification, now)
        return classification, decision
