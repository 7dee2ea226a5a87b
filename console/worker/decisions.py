"""The worker's judgement, from the stored facts of an intent and the core's rules, and
the settings it judges by.

``SendDecisions`` decides at the claim (send it, or close it: expired, suppressed,
ineligible), after an attempt (where the outcome sends the intent), and at lease
expiry (could the silent worker have handed the message over?). The store only carries
out. ``WorkerSettings`` is the part of the product's settings the send loop needs.

``EligibilityPolicy``: an application names a module in ``CONSOLE_ELIGIBILITY_MODULE``;
that module defines ``ELIGIBILITY_CHECKS``, a mapping from an intent's ``purpose`` to a
function ``check(intent, session) -> str | None``. The function gets the claimed intent
(``console.store.statements.DueIntent``: recipient, event, params, ...) and a session
inside the claim transaction, and returns ``None`` when the mail may still go, or the
reason it must not (the intent becomes ``cancelled`` with that reason). For example::

    def still_unverified(intent, session):
        user = session.get(User, intent.params["user_id"])
        return "already verified" if user.verified_at else None

    ELIGIBILITY_CHECKS = {"verify-email": still_unverified}
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.orm import Session

from console.config import Settings
from console.core.backoff import Backoff
from console.core.classify import Overrides, parse_overrides
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

log = logging.getLogger("console.worker.loop")


# Intents a claim takes for each connection when CONSOLE_BATCH_SIZE is not set: every
# connection count then sends a batch in about the time one connection sends 50.
BATCH_PER_CONNECTION = 50


def batch_size_for(configured: int | None, connections: int) -> int:
    """The intents a claim takes: `configured` (CONSOLE_BATCH_SIZE), else
    ``BATCH_PER_CONNECTION`` for each of the worker's `connections`."""
    return configured if configured is not None else BATCH_PER_CONNECTION * max(1, connections)


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """The part of the product's settings the send loop needs."""

    mail_from: str
    retry: RetryPolicy
    batch_size: int = 50
    lease_seconds: float = 300.0
    concurrency: int = 1
    overrides: Overrides = Overrides()
    suppress_refused_mailboxes: bool = True
    provider: str | None = None  # CONSOLE_PROVIDER: its metadata header names the intent

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerSettings:
        backoff = Backoff(
            settings.retry_base_seconds, settings.retry_cap_seconds, settings.retry_floor_seconds
        )
        return cls(
            mail_from=settings.mail_from,
            retry=RetryPolicy(backoff, settings.max_attempts, settings.max_age_seconds),
            batch_size=batch_size_for(settings.batch_size, settings.smtp_connections),
            lease_seconds=settings.lease_seconds,
            concurrency=settings.smtp_connections,
            overrides=parse_overrides(settings.classify_overrides),
            suppress_refused_mailboxes=settings.suppress_refused_mailboxes,
            provider=settings.provider,
        )


EligibilityCheck = Callable[[Any, Session], "str | None"]
CHECKS_ATTRIBUTE = "ELIGIBILITY_CHECKS"


class EligibilityError(ValueError):
    """The eligibility module cannot be loaded or does not define its checks."""


class EligibilityPolicy:
    """The checks an application registered, looked up by purpose."""

    def __init__(self, checks: Mapping[str, EligibilityCheck] | None = None) -> None:
        self.checks = dict(checks or {})
        for purpose, check in self.checks.items():
            if not callable(check):
                raise EligibilityError(f"the eligibility check for {purpose!r} is not callable")

    @classmethod
    def from_module(cls, module_name: str | None) -> EligibilityPolicy:
        """Load ``ELIGIBILITY_CHECKS`` from `module_name`; no module means no checks."""
        if not module_name:
            return cls()
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise EligibilityError(
                f"CONSOLE_ELIGIBILITY_MODULE: cannot import {module_name!r}: {error}"
            ) from None
        checks = getattr(module, CHECKS_ATTRIBUTE, None)
        if not isinstance(checks, Mapping):
            raise EligibilityError(
                f"CONSOLE_ELIGIBILITY_MODULE: {module_name!r} must define {CHECKS_ATTRIBUTE}, "
                "a dict from purpose to check function"
            )
        return cls(checks)

    def has_check(self, intent: Any) -> bool:
        """Whether the application registered a check for the purpose of `intent`."""
        return bool(intent.purpose) and intent.purpose in self.checks

    def reason_not_to_send(self, intent: Any, session: Session) -> str | None:
        """Return why `intent` must not be sent, or None; exceptions propagate."""
        check = self.checks.get(intent.purpose) if intent.purpose else None
        if check is None:
            return None
        reason = check(intent, session)
        return str(reason) if reason else None


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
