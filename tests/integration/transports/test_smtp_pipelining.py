"""MAIL FROM and RCPT TO in one write when the relay offers PIPELINING (RFC 2920), against
a relay that holds back its reply to MAIL until it sees whether RCPT follows at once.

Each refusal is reported as it was without pipelining (the sender's at MAIL, the
recipient's at RCPT), the connection stays in step with the relay (RSET, the next
message on it), and a relay that does not offer PIPELINING gets one command at a time.
"""

from __future__ import annotations

import asyncio

import aiosmtplib
import pytest

from console.transports import smtp_pipelining as pipelining
from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, ENVELOPE, REPLY_READ
from tests.support.smtp_relay import relays
from tests.support.transport_sends import emails, outgoing, send_all

TIMEOUT_SECONDS = 2.0


@pytest.fixture
def relay_with():
    with relays() as start:
        yield start


def failure(result) -> tuple:
    """Where and how a send failed: stage, reply code, the error's type name."""
    return result.stage, result.code, result.error_type


@pytest.mark.parametrize("split", [False, True], ids=["replies-together", "replies-apart"])
def test_mail_and_rcpt_go_together_when_the_relay_offers_pipelining(relay_with, split):
    relay = relay_with(split=split)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    results = send_all(transport, emails("ada@example.com", "bob@example.com", "cy@example.com"))
    assert [(r.stage, r.code) for r in results] == [(REPLY_READ, 250)] * 3
    assert relay.pipelined == [True, True, True]
    assert relay.connections == 1 and len(relay.delivered) == 3


def test_a_relay_that_does_not_offer_pipelining_gets_one_command_at_a_time(relay_with):
    relay = relay_with(pipelining=False)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    results = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert [r.code for r in results] == [250, 250]
    assert relay.pipelined == [False, False]


def test_a_refused_sender_is_reported_at_mail_and_the_connection_goes_on(relay_with):
    relay = relay_with(mail_replies={1: b"550 5.7.1 Sender address rejected\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert failure(refused) == (ENVELOPE, 550, aiosmtplib.SMTPSenderRefused.__name__)
    assert "Sender address rejected" in refused.reply_text
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 1 and relay.delivered == ["ok"]
    assert relay.commands.count("RSET") == 1


def test_a_refused_recipient_is_reported_at_rcpt_and_the_connection_goes_on(relay_with):
    relay = relay_with(rcpt_replies={"gone@example.com": b"550 5.1.1 No such user\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("gone@example.com", "bob@example.com"))
    assert failure(refused) == (ENVELOPE, 550, aiosmtplib.SMTPRecipientRefused.__name__)
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 1 and relay.pipelined == [True, True]


def test_a_relay_closing_at_mail_is_reported_and_the_next_message_gets_a_new_connection(
    relay_with,
):
    relay = relay_with(mail_replies={1: b"421 4.3.2 Shutting down\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    closed, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert (closed.stage, closed.code) == (ENVELOPE, 421)
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 2 and relay.delivered == ["ok"]


def test_the_body_still_waits_for_the_data_sent_mark(relay_with):
    relay = relay_with()
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    stages: list[tuple[str, list[str]]] = []

    async def on_stage(email, stage):
        if stage == DATA_SENT:
            await asyncio.sleep(0.05)  # a slow mark: neither DATA nor the body may go meanwhile
        stages.append((stage, list(relay.commands), list(relay.delivered)))

    async def run():
        result = await transport.send(outgoing("ada@example.com"), on_stage)
        await transport.close()
        return result

    assert asyncio.run(run()).code == 250
    _, commands, delivered = next(s for s in stages if s[0] == DATA_SENT)
    assert commands[-2:] == ["MAIL", "RCPT"], "DATA waits for the mark"
    assert delivered == [] and relay.delivered == ["ok"]


def test_a_sender_refused_by_a_relay_that_then_hangs_up_is_still_the_senders_refusal(
    relay_with,
):
    relay = relay_with(
        mail_replies={1: b"554 5.7.1 Access denied\r\n"}, hang_up_after_mail=frozenset({1})
    )
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert failure(refused) == (ENVELOPE, 554, aiosmtplib.SMTPSenderRefused.__name__)
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 2


def test_a_command_line_with_a_control_character_is_refused_before_anything_is_sent(
    relay_with,
):
    relay = relay_with()

    async def run():
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=int(relay.url.rsplit(":", 1)[1]))
        await client.connect()
        try:
            with pytest.raises(ValueError, match="control character"):
                await pipelining.mail_and_rcpt(client, b"MAIL FROM:<a@b.c>", b"RCPT TO:<x\x00@y.z>")
            await client.noop()  # the connection is still in step
        finally:
            await client.quit()

    asyncio.run(run())
    assert "MAIL" not in relay.commands
