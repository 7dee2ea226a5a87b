"""The table of throttling signals: which 4yz replies make a recipient domain back off."""

from __future__ import annotations

import pytest

from console.core.classify import enhanced_status_of
from console.core.send_result import SendResult
from console.core.throttle_signals import RULES, Reply, is_signal, reply_of, rule_for
from console.vocabulary import CONNECTING, DATA_SENT, ENVELOPE, REPLY_READ

# (reply line, the command it answered, a throttling signal?)
ROWS = [
    ("421 4.7.0 Service not available, closing transmission channel", "MAIL", True),
    ("421 4.3.2 System not accepting network messages", "DATA", True),
    ("421 Too many concurrent SMTP connections", "greeting", True),
    ("451 4.7.1 Rate limited, slow down", "RCPT", True),
    ("451 4.7.500 Server busy. Please try again later from [192.0.2.1]", "RCPT", True),
    ("421 4.7.28 Our system has detected an unusual rate of unsolicited mail", "DATA", True),
    ("450 4.7.1 Client host rejected: cannot find your hostname", "RCPT", True),
    ("452 Too many recipients received this hour", "RCPT", True),
    ("451 Rate limit exceeded, come back in a minute", "MAIL", True),
    ("451 4.3.0 Throttled: too much mail from your address", "DATA", True),
    ("451 4.7.1 Greylisted, please try again later", "RCPT", False),
    ("450 4.2.0 <bob@example.org>: Recipient address rejected: Greylisted", "RCPT", False),
    ("451 4.7.1 Greylisting in action, please come back later", "DATA", False),
    ("421 4.7.0 graylisted, try again in 300 seconds", "RCPT", False),
    ("452 4.2.2 Mailbox full", "RCPT", False),
    ("450 4.2.1 The user is receiving mail at a rate that prevents more messages", "RCPT", False),
    ("451 4.3.0 Temporary failure", "DATA", False),
    ("451 4.3.0 Temporary local problem, try again later", "DATA", False),
    ("451 Temporary local problem - please try later", "DATA", False),
    ("451 4.4.1 No answer from host", "DATA", False),
    ("450 4.4.2 Too many hops, lost connection", "DATA", False),
    ("454 4.7.0 Throttling failure: Maximum sending rate exceeded.", "DATA", False),
    ("454 4.7.0 Temporary authentication failure", "AUTH", False),
    ("452 4.3.1 Insufficient system storage", "MAIL", False),
    ("450 4.2.0 Mailbox busy, try again later", "RCPT", False),
]


@pytest.mark.parametrize("line, command, signal", ROWS, ids=[row[0] for row in ROWS])
def test_each_row(line, command, signal):
    code, _, text = line.partition(" ")
    verdict = rule_for(Reply(int(code), enhanced_status_of(text), text, command))
    assert verdict.signal is signal, verdict.meaning


def test_the_table_ends_with_a_rule_that_takes_any_other_4yz_as_one_messages_retry():
    last = RULES[-1]
    assert not last.signal
    assert rule_for(Reply(459, None, "", None)) is last
    assert sum(1 for rule in RULES if rule.matches(Reply(459, None, "", None))) == 1


@pytest.mark.parametrize(
    "result",
    [
        SendResult(stage=REPLY_READ, code=250, reply_text="2.0.0 Ok: queued as ABC"),
        SendResult(stage=ENVELOPE, code=550, reply_text="5.7.1 Rate limited for ever"),
        SendResult(stage=CONNECTING, error="ConnectionRefusedError"),
        SendResult(stage=DATA_SENT, protocol="http", code=429, reply_text="rate limited"),
    ],
    ids=["accepted", "5yz", "no reply", "HTTP 429"],
)
def test_only_an_smtp_4yz_reply_is_read(result):
    assert reply_of(result) is None
    assert not is_signal(reply_of(result))


@pytest.mark.parametrize(
    "error_type, stage, command",
    [
        ("SMTPSenderRefused", ENVELOPE, "MAIL"),
        ("SMTPRecipientRefused", ENVELOPE, "RCPT"),
        ("SMTPRecipientsRefused", ENVELOPE, "RCPT"),
        ("SMTPDataError", DATA_SENT, "DATA"),
        ("SMTPConnectResponseError", CONNECTING, "greeting"),
        (None, REPLY_READ, "DATA"),
    ],
)
def test_a_reply_knows_the_command_it_answered(error_type, stage, command):
    result = SendResult(
        stage=stage, code=451, reply_text="4.7.1 Rate limited", error_type=error_type
    )
    assert reply_of(result) == Reply(451, "4.7.1", "4.7.1 Rate limited", command)


def test_the_enhanced_status_stored_on_the_result_wins_over_the_text():
    result = SendResult(stage=ENVELOPE, code=451, enhanced_status="4.7.1", reply_text="busy")
    assert reply_of(result).enhanced_status == "4.7.1"


def test_4_4_x_is_a_signal_only_where_its_text_says_so_before_data():
    at_rcpt = Reply(451, "4.4.0", "4.4.0 too many connections", "RCPT")
    after_data = Reply(451, "4.4.0", "4.4.0 too many connections", "DATA")
    assert rule_for(at_rcpt).signal and not rule_for(after_data).signal
