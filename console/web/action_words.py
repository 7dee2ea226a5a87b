"""What an operator reads about an action on intents: its warnings and its bulk summaries.

The store returns the facts (``RequeueResult``, ``BulkPreview``, ``BulkConfirmation``); these
put them in the words the intent pages and the bulk preview show.
"""

from __future__ import annotations

from console.store.bulk_actions import BulkPreview
from console.store.bulk_confirmations import BulkConfirmation
from console.store.intent_actions import RequeueResult
from console.vocabulary import DEAD, PENDING, SENDING, SUBMITTED, SUPPRESSED
from console.web.display import plural

_SKIP_WORDS = {
    SUBMITTED: "already submitted",
    PENDING: "already pending",
    SENDING: "being sent",
    SUPPRESSED: "held back by a suppression",
    DEAD: "already dead",
}


def suppression_warning(recipient: str) -> str:
    """Say that requeueing mail to suppressed `recipient` will not send it."""
    return (
        f"{recipient} is on the suppression list: the worker will hold this mail back "
        "unless the suppression is removed"
    )


def too_old_warning(template: str, max_age_seconds: float) -> str:
    """Say that mail past its template's max age will be expired again, not sent."""
    return (
        f"{template} mail is useless after {max_age_seconds / 60:.0f} min and this one is "
        "older: the worker will expire it instead of sending it"
    )


def requeue_warning(
    result: RequeueResult, *, recipient: str, template: str, max_age_seconds: float | None
) -> str | None:
    """The warning after a requeue, when something will still keep the mail from being sent."""
    warnings = []
    if result.recipient_suppressed:
        warnings.append(suppression_warning(recipient))
    if result.past_max_age and max_age_seconds is not None:
        warnings.append(too_old_warning(template, max_age_seconds))
    return "; ".join(warnings) or None


def bulk_summary(preview: BulkPreview) -> str:
    """Say the effect in one line: "requeues 412; 9 suppressed recipients skipped; ..."."""
    verb = {"requeue": "requeues", "dead_letter": "dead-letters"}[preview.action]
    parts = [f"{verb} {preview.will_act}"]
    if preview.eligible > preview.limit:
        parts.append(f"{preview.eligible - preview.limit} more left for another run")
    if preview.suppressed_skipped:
        recipients = plural(preview.suppressed_skipped, "suppressed recipient")
        parts.append(f"{recipients} skipped")
    if preview.scrubbed_skipped:
        parts.append(f"{preview.scrubbed_skipped} with params removed by retention skipped")
    if preview.expired_skipped:
        parts.append(f"{preview.expired_skipped} past their expiry skipped")
    for status, count in sorted(preview.skipped_by_status.items()):
        parts.append(f"{count} {_SKIP_WORDS.get(status, status)}")
    return "; ".join(parts)


def confirmation_summary(confirmation: BulkConfirmation) -> str:
    """Say who confirmed a preview already, when, and what it did."""
    verb = {"requeue": "requeued", "dead_letter": "dead-lettered"}[confirmation.action]
    return (
        f"already confirmed by {confirmation.actor} at "
        f"{confirmation.confirmed_at:%Y-%m-%d %H:%M:%S} UTC: "
        f"{verb} {plural(confirmation.acted, 'intent')}"
    )
