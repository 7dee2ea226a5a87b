"""Which synchronous refusals say the mailbox itself is unknown or disabled. Pure.

A relay that answers RCPT or the body with ``550 5.1.1 user unknown`` has told
us, as surely as a bounce would, that the address must not be tried again.
Other permanent refusals (policy, content, ``5.7.x``) fail the one intent only.
"""

from __future__ import annotations

from console.core.classify import enhanced_status_of
from console.core.outcomes import Classification
from console.core.send_result import SendResult
from console.vocabulary import PERMANENT

MAILBOX_REFUSAL_CODES = frozenset({550, 551, 553})
# RFC 3463: bad destination mailbox (5.1.1), bad destination system (5.1.2),
# null MX (5.1.10), mailbox disabled (5.2.1).
MAILBOX_GONE_STATUSES = frozenset({"5.1.1", "5.1.2", "5.1.10", "5.2.1"})


def refuses_the_mailbox(result: SendResult, classification: Classification) -> bool:
    """Return whether a permanent SMTP refusal names the mailbox as unknown or disabled."""
    if classification.outcome != PERMANENT or result.protocol != "smtp":
        return False
    if result.code not in MAILBOX_REFUSAL_CODES:
        return False
    enhanced = result.enhanced_status or enhanced_status_of(result.reply_text)
    return enhanced in MAILBOX_GONE_STATUSES
