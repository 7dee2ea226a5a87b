"""Which rule settles an ambiguous send in this deployment, and that rule exercised.

A deployment that receives provider events (a webhook secret, a native webhook's key or
an SNS topic) settles it when the event proving acceptance arrives: the drill records
such an event as the webhook would. Without one an operator settles it: the drill
marks it accepted as the console's action does, audited. Where the provider's
lookup API is configured it is also asked (not here: the drill reaches no provider).
"""

from __future__ import annotations

import dataclasses

from console.config import Settings
from console.drill.context import DrillContext
from console.events import ReportedEvent
from console.models import Intent
from console.store.provider_events import record_events
from console.store.reconciliation import reconcile

ASKING_PROVIDERS = ("mailgun", "postmark", "sendgrid")  # transports/<name>_lookup.py
DRILL_ACTOR = "console drill"


@dataclasses.dataclass(frozen=True)
class Rule:
    events: bool  # provider events arrive
    asking: str | None  # the provider whose lookup API is asked

    def describe(self) -> str:
        how = "a provider event settles it" if self.events else "an operator settles it"
        if self.asking:
            how += f" ({self.asking}'s lookup API is asked too, not in the drill)"
        return how


def reconciliation_rule(settings: Settings) -> Rule:
    events = any(
        (settings.webhook_secret, settings.resend_webhook_secret, settings.postmark_webhook_user,
         settings.mailgun_signing_key, settings.sendgrid_public_key, settings.sns_topic_arns)
    )  # fmt: skip
    asking = settings.provider if settings.provider in ASKING_PROVIDERS else None
    return Rule(events=events, asking=asking)


def exercise_rule(ctx: DrillContext, intent: Intent) -> tuple[str, str]:
    """Settle the ambiguous `intent` the deployment's way; return (its status, how)."""
    rule = reconciliation_rule(ctx.settings)
    with ctx.sessions() as session:
        if rule.events:
            event = ReportedEvent(
                source="webhook", source_event_id=f"drill-{ctx.run}-{intent.id}",
                event_type="delivered", recipient=intent.recipient, message_id=intent.message_id,
            )  # fmt: skip
            record_events(session, [event])
            how = "a delivered event recorded"
        else:
            reconcile(session, intent.id, resolution="accepted", actor=DRILL_ACTOR,
                      reason="drill: the relay took the body")  # fmt: skip
            how = "an operator marked it accepted"
        session.commit()
    return ctx.intent(intent.id).status, how
