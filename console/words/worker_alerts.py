"""What the alerts the worker raises say when they fire: one sentence each, from its facts."""

from __future__ import annotations


def relay_refused(lane: str, reply: str) -> str:
    """The relay refused the session: the lane is paused, and where to look."""
    return (
        f"the relay refused the session ({reply}): the {lane} lane is paused "
        "and its mail waits; check CONSOLE_SMTP_EHLO_NAME, CONSOLE_MAIL_FROM, the credentials "
        "in CONSOLE_SMTP_URL and the relay's configuration"
    )


def smtputf8_missing(relay: str) -> str:
    """The relay lacks SMTPUTF8: mail to non-ASCII addresses fails there."""
    return (
        f"the relay {relay} does not offer SMTPUTF8: mail to non-ASCII addresses fails "
        "there (RFC 6531); use a relay that offers it"
    )
