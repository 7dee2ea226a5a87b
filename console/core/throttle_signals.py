"""Which SMTP 4yz replies say a recipient domain is throttling us: one table. Pure, no IO.

A throttling signal counts towards the domain's back-off (``console.core.domain_backoff``);
any other 4yz is the retry of that one message and says nothing about the domain.
The rules are tried in order and the first that matches decides, so a text that names
the cause wins over a code that could mean several: "greylisted" is about one
sender-recipient pair even under ``4.7.1``, and a mailbox's own status (``4.2.x``)
wins over the word "rate" in its text. "Try (again) later" alone is no signal: every
4yz asks for that, one message's trouble included.
"""

from __future__ import annotations

import dataclasses
import re

from console.core.blame import refused_command
from console.core.classify import enhanced_status_of
from console.core.send_result import SendResult, handed_over
from console.vocabulary import CONNECTING

GREYLISTING_TEXT = re.compile(r"gr[ae]y[\s-]?list", re.IGNORECASE)
RATE_TEXT = re.compile(
    r"\brate\b|\bratelimit|rate[\s-]limit|too\s+many|throttl|slow\s+down", re.IGNORECASE
)


@dataclasses.dataclass(frozen=True)
class Reply:
    """A 4yz reply as the table reads it, and the command it answered."""

    code: int
    enhanced_status: str | None = None
    text: str = ""
    command: str | None = None  # "greeting", "EHLO", "AUTH", "MAIL", "RCPT" or "DATA"


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row: a reply matches when it meets every condition given."""

    signal: bool
    meaning: str
    codes: frozenset[int] = frozenset()
    enhanced_prefix: str = ""
    text: re.Pattern[str] | None = None
    commands: frozenset[str] = frozenset()

    def matches(self, reply: Reply) -> bool:
        return (
            (not self.codes or reply.code in self.codes)
            and (reply.enhanced_status or "").startswith(self.enhanced_prefix)
            and (self.text is None or bool(self.text.search(reply.text)))
            and (not self.commands or reply.command in self.commands)
        )


RULES: tuple[Rule, ...] = (
    Rule(False, "greylisting: one sender-recipient pair's first try", text=GREYLISTING_TEXT),
    Rule(True, "421: the server closes the session", codes=frozenset({421})),
    Rule(False, "4.2.x: one mailbox (full, disabled, over its own rate)", enhanced_prefix="4.2."),
    Rule(False, "454: TLS, AUTH or the account's own rate at the relay", codes=frozenset({454})),
    Rule(
        False,
        "4.4.x after DATA: the onward delivery of this message",
        enhanced_prefix="4.4.",
        commands=frozenset({"DATA"}),
    ),
    Rule(True, "the text says we send too fast", text=RATE_TEXT),
    Rule(True, "4.7.x: the domain's policy refuses us for now", enhanced_prefix="4.7."),
    Rule(False, "any other 4yz (4.3.0, 4.4.x, ...): this message's retry"),
)


def rule_for(reply: Reply) -> Rule:
    """Return the first rule of the table that `reply` matches."""
    return next(rule for rule in RULES if rule.matches(reply))


def is_signal(reply: Reply | None) -> bool:
    """Whether `reply` (None: no SMTP 4yz) is a throttling signal from the domain."""
    return reply is not None and rule_for(reply).signal


def reply_of(result: SendResult) -> Reply | None:
    """The SMTP 4yz reply `result` carries, with the command it answered; else None."""
    code = result.code
    if result.protocol != "smtp" or code is None or not 400 <= code < 500:
        return None
    command = refused_command(result.error_type, result.stage == CONNECTING)
    if command is None and handed_over(result.stage):
        command = "DATA"
    enhanced = result.enhanced_status or enhanced_status_of(result.reply_text)
    return Reply(code, enhanced, result.reply_text or "", command)
