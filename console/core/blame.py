"""What a 5yz refusal blames (RFC 5321 §4.2, RFC 3463): the recipient, the message, or the
session itself (our sender, our name, our credentials, the relay's configuration). Pure.

Only a refusal of the recipient or of the message says something about one intent. A
refusal at the greeting, EHLO, AUTH or MAIL, a protocol error (``5.5.x``), "relaying
denied", an authentication failure, or a restriction Postfix delays to RCPT (HELO,
client, sender) is the same for every message: failing the intents one by one would burn
the queue, so the worker pauses the lane and tells an operator instead.
"""

from __future__ import annotations

import re

SESSION = "session"
RECIPIENT = "recipient"
MESSAGE = "message"
THROTTLING = "throttling"  # the provider's sending rate for our account, not this message

# Which command an aiosmtplib error (or our own check) answers.
_COMMAND_OF_ERROR = {
    "SMTPConnectResponseError": "greeting",
    "SMTPHeloError": "EHLO",
    "SMTPAuthenticationError": "AUTH",
    "SMTPSenderRefused": "MAIL",
    "SMTPRecipientRefused": "RCPT",
    "SMTPRecipientsRefused": "RCPT",
    "SMTPDataError": "DATA",
}
_SESSION_COMMANDS = frozenset({"greeting", "EHLO", "AUTH"})
AUTH_FAILURE_CODES = frozenset({530, 534, 535, 538})
# 5.7.8 credentials invalid, 5.7.9 mechanism too weak, 5.7.10/5.7.11 encryption needed.
_AUTH_STATUSES = frozenset({"5.7.8", "5.7.9", "5.7.10", "5.7.11"})
_SESSION_TEXT = re.compile(
    r"relay(ing)?\s+(access\s+)?(denied|not\s+permitted|prohibited|not\s+allowed)"
    r"|not\s+permitted\s+to\s+relay|unable\s+to\s+relay|authentication\s+required"
    r"|(helo\s+command|client\s+host|sender\s+address)\s+rejected",
    re.IGNORECASE,
)


# SES: "454 4.7.0 Throttling failure: Maximum sending rate exceeded."; others say "rate limit".
_THROTTLING_TEXT = re.compile(
    r"throttl|maximum\s+sending\s+rate|sending\s+rate\s+exceeded|rate\s+limit", re.IGNORECASE
)
THROTTLING_HTTP_STATUS = 429


def is_throttling(code: int | None, enhanced_status: str | None, reply_text: str | None) -> bool:
    """Whether a 4yz reply says we send too fast (SES 454 4.7.0 Throttling, a rate limit)."""
    if code is None or not 400 <= code < 500:
        return False
    if code == 454 and enhanced_status == "4.7.0":
        return True
    return bool(_THROTTLING_TEXT.search(reply_text or ""))


def refused_command(error_type: str | None, connecting: bool) -> str | None:
    """The SMTP command a refusal answered, from the error the transport reported."""
    command = _COMMAND_OF_ERROR.get(error_type or "")
    if command is None and connecting:
        return "greeting"
    return command


def refusal_blame(
    code: int, enhanced_status: str | None, reply_text: str | None, command: str | None
) -> str | None:
    """Return SESSION, RECIPIENT or MESSAGE for a 5yz refusal; None for any other code."""
    if not 500 <= code < 600:
        return None
    subject = enhanced_status.split(".")[1] if enhanced_status else None
    if command in _SESSION_COMMANDS or subject == "5":
        return SESSION
    if code in AUTH_FAILURE_CODES or enhanced_status in _AUTH_STATUSES:
        return SESSION
    if _SESSION_TEXT.search(reply_text or ""):
        return SESSION
    if command == "MAIL":
        # The size or the content of this message (SIZE=, SMTPUTF8) is about the message;
        # anything else refused at MAIL is about our sender or our session.
        if enhanced_status in ("5.3.4", "5.2.3") or subject == "6":
            return MESSAGE
        return SESSION
    if command == "RCPT":
        return RECIPIENT
    return MESSAGE
