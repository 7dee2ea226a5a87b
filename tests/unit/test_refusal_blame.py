# ruff: noqa: E501 - one row a line: the table reads as the RFCs' list
"""Refusals split by what they blame (RFC 5321, RFC 3463): the recipient or the message
fails the intent; the session, the sender or our configuration pauses sending instead."""

from __future__ import annotations

import aiosmtplib
import pytest

from console.core.classify import MESSAGE_TOO_BIG, SMTPUTF8_NOT_OFFERED, classify
from console.core.send_result import SendResult
from console.transports.smtp import describe_failure
from console.vocabulary import CONNECTING, DATA_SENT, ENVELOPE, PERMANENT, TRANSIENT

SESSION, RECIPIENT, MESSAGE = "session", "recipient", "message"

RCPT = aiosmtplib.SMTPRecipientRefused
MAIL = aiosmtplib.SMTPSenderRefused
DATA = aiosmtplib.SMTPDataError


def rcpt(code, text):
    return describe_failure(RCPT(code, text, "bob@example.com"), ENVELOPE)


def rcpt_all(code, text):
    refused = RCPT(code, text, "bob@example.com")
    return describe_failure(aiosmtplib.SMTPRecipientsRefused([refused]), ENVELOPE)


def mail(code, text):
    return describe_failure(MAIL(code, text, "shop@example.com"), ENVELOPE)


def data(code, text):
    return describe_failure(DATA(code, text), DATA_SENT)


# (what the relay said, the result, outcome, blamed)
ROWS = [
    # recipient-level at RCPT: fail the intent
    ("550 5.1.1 at RCPT", rcpt(550, "5.1.1 <bob@example.com>: User unknown"), PERMANENT, RECIPIENT),
    ("551 5.1.6 at RCPT", rcpt(551, "5.1.6 moved"), PERMANENT, RECIPIENT),
    ("553 5.1.3 at RCPT", rcpt(553, "5.1.3 bad address syntax"), PERMANENT, RECIPIENT),
    ("552 5.2.2 at RCPT", rcpt(552, "5.2.2 mailbox full"), PERMANENT, RECIPIENT),
    ("550 5.2.1 at RCPT", rcpt_all(550, "5.2.1 mailbox disabled"), PERMANENT, RECIPIENT),
    ("550 5.3.0 at RCPT", rcpt(550, "5.3.0 other mail system problem"), PERMANENT, RECIPIENT),
    ("550 without enhanced status at RCPT", rcpt(550, "no such user"), PERMANENT, RECIPIENT),
    ("554 5.7.1 recipient policy at RCPT", rcpt(554, "5.7.1 <bob@x>: Recipient address rejected: Access denied"), PERMANENT, RECIPIENT),
    # message-level after the body, or a size refused at MAIL
    ("554 5.7.1 after the body", data(554, "5.7.1 spam"), PERMANENT, MESSAGE),
    ("552 5.3.4 after the body", data(552, "5.3.4 message file too big"), PERMANENT, MESSAGE),
    ("552 5.3.4 at MAIL (SIZE)", mail(552, "5.3.4 Message size exceeds fixed limit"), PERMANENT, MESSAGE),
    ("550 5.6.7 at MAIL (SMTPUTF8)", mail(553, "5.6.7 SMTPUTF8 required"), PERMANENT, MESSAGE),
    # temporary: retried as before
    ("450 4.2.0 at RCPT", rcpt(450, "4.2.0 <bob@x>: Recipient address rejected: busy"), TRANSIENT, None),
    ("451 4.3.0 at MAIL", mail(451, "4.3.0 try later"), TRANSIENT, None),
    ("421 after the body", data(421, "4.7.0 closing"), TRANSIENT, None),
    # the session, the sender or our configuration: pause, do not fail
    ("504 5.5.2 at RCPT (HELO rejected)", rcpt(504, "5.5.2 <vm>: Helo command rejected: need fully-qualified hostname"), TRANSIENT, SESSION),
    ("501 5.5.4 at RCPT", rcpt(501, "5.5.4 Syntax error"), TRANSIENT, SESSION),
    ("554 5.7.1 relay access denied at RCPT", rcpt(554, "5.7.1 <bob@elsewhere.example>: Relay access denied"), TRANSIENT, SESSION),
    ("550 relaying denied at RCPT", rcpt(550, "Relaying denied"), TRANSIENT, SESSION),
    ("530 5.7.0 authentication required at MAIL", mail(530, "5.7.0 Authentication required"), TRANSIENT, SESSION),
    ("530 5.7.0 authentication required at RCPT", rcpt(530, "5.7.0 Authentication required"), TRANSIENT, SESSION),
    ("550 5.7.1 sender rejected at MAIL", mail(550, "5.7.1 <shop@example.com>: Sender address rejected: Access denied"), TRANSIENT, SESSION),
    ("553 5.1.8 at MAIL (bad sender domain)", mail(553, "5.1.8 Domain of sender address does not exist"), TRANSIENT, SESSION),
    ("550 at MAIL without enhanced status", mail(550, "not allowed"), TRANSIENT, SESSION),
    ("554 5.5.0 after the body", data(554, "5.5.0 protocol error"), TRANSIENT, SESSION),
    ("535 5.7.8 AUTH", describe_failure(aiosmtplib.SMTPAuthenticationError(535, "5.7.8 bad credentials"), CONNECTING), TRANSIENT, SESSION),
    ("501 at EHLO", describe_failure(aiosmtplib.SMTPHeloError(501, "5.5.4 invalid"), CONNECTING), TRANSIENT, SESSION),
    ("554 greeting", describe_failure(aiosmtplib.SMTPConnectResponseError(554, "5.3.2 no service"), CONNECTING), TRANSIENT, SESSION),
    # our own checks before MAIL
    ("SMTPUTF8 not offered", SendResult(stage=ENVELOPE, error="the relay does not offer SMTPUTF8", error_type=SMTPUTF8_NOT_OFFERED), PERMANENT, MESSAGE),
    ("over the advertised SIZE", SendResult(stage=ENVELOPE, error="2000 bytes over SIZE 1000", error_type=MESSAGE_TOO_BIG), PERMANENT, MESSAGE),
]  # fmt: skip


@pytest.mark.parametrize("row,result,outcome,blamed", ROWS, ids=[row[0] for row in ROWS])
def test_each_refusal_blames_what_the_rfcs_say(row, result, outcome, blamed):
    classification = classify(result)
    assert classification.outcome == outcome, row
    assert classification.blamed == blamed, row
    assert classification.blames_session == (blamed == SESSION)
    if blamed == SESSION:
        assert classification.alert, "a refusal of the session must reach an operator"
        assert result.reply_text and result.reply_text in classification.reason


def test_a_session_refusal_is_never_moved_to_permanent_by_an_override():
    from console.core.classify import parse_overrides

    overrides = parse_overrides("504=permanent")
    result = rcpt(504, "5.5.2 <vm>: Helo command rejected: need fully-qualified hostname")
    assert classify(result, overrides).blames_session
