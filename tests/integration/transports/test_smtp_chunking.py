"""The body as one BDAT chunk when the relay offers CHUNKING (RFC 3030), DATA otherwise.

The relay gets the same message either way (CRLF line endings, no dot-stuffing with
BDAT); its reply to the chunk is read as the reply after DATA's closing dot: accepted
with the queue id, refused (the connection goes on after RSET), or none at all when
it hangs up (the body may have arrived: an ambiguous end). The ``data_sent`` mark
still comes before any byte of the body.
"""

from __future__ import annotations

import asyncio

import aiosmtplib
import pytest

from console.core.classify import classify
from console.transports.smtp import SmtpTransport
from console.transports.smtp_chunking import canonical_body
from console.vocabulary import AMBIGUOUS, DATA_SENT, PERMANENT, REPLY_READ
from tests.support.smtp_relay import relays
from tests.support.transport_sends import emails, outgoing, send_all

TIMEOUT_SECONDS = 2.0
DOTTED = (
    b"From: shop@example.com\r\nTo: ada@example.com\r\nSubject: hi\r\n"
    b"Message-ID: <m1@example.com>\r\n\r\n.a line that starts with a dot\nbare LF\r\n.\r\nend"
)


@pytest.fixture
def relay_with():
    with relays(chunking=True) as start:
        yield start


@pytest.mark.parametrize("pipelining", [True, False], ids=["with-pipelining", "alone"])
def test_the_body_goes_as_one_bdat_chunk_when_the_relay_offers_chunking(relay_with, pipelining):
    relay = relay_with(pipelining=pipelining)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    results = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert [(r.stage, r.code, r.provider_message_id) for r in results] == [
        (REPLY_READ, 250, "QUEUED1"),
        (REPLY_READ, 250, "QUEUED2"),
    ]
    assert "DATA" not in relay.commands and relay.commands.count("BDAT") == 2
    assert relay.connections == 1


def test_the_relay_gets_the_same_message_by_bdat_as_by_data(relay_with):
    by_bdat, by_data = relay_with(), relay_with(chunking=False)
    for relay in (by_bdat, by_data):
        transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
        [result] = send_all(transport, [outgoing("ada@example.com", body=DOTTED)])
        assert result.code == 250
    assert by_data.commands.count("DATA") == 1 and "BDAT" not in by_data.commands
    assert by_bdat.bodies == by_data.bodies == [canonical_body(DOTTED)]
    assert by_bdat.bodies[0].endswith(b"\r\nend\r\n") and b"\nbare LF\r\n" in DOTTED


def test_a_refused_chunk_is_the_relays_final_refusal_and_the_connection_goes_on(relay_with):
    relay = relay_with(body_replies={1: b"554 5.7.1 Message rejected as spam\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert (refused.stage, refused.code) == (DATA_SENT, 554)
    assert refused.error_type == aiosmtplib.SMTPDataError.__name__
    assert classify(refused).outcome == PERMANENT
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 1 and relay.commands.count("RSET") == 1


def test_a_relay_hanging_up_after_the_chunk_leaves_the_message_ambiguous(relay_with):
    relay = relay_with(body_replies={1: b"hangup"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    gone, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert (gone.stage, gone.code) == (DATA_SENT, None)
    assert classify(gone).outcome == AMBIGUOUS
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 2 and len(relay.bodies) == 2


def test_no_byte_of_the_body_leaves_before_the_data_sent_mark(relay_with):
    relay = relay_with()
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    seen_at_mark: list[list[str]] = []

    async def on_stage(email, stage):
        if stage == DATA_SENT:
            await asyncio.sleep(0.05)  # a slow mark: the relay must have nothing yet
            seen_at_mark.append(list(relay.commands))

    async def run():
        result = await transport.send(outgoing("ada@example.com"), on_stage)
        await transport.close()
        return result

    assert asyncio.run(run()).code == 250
    assert seen_at_mark == [["EHLO", "MAIL", "RCPT"]] and relay.bodies


def test_keywords_the_operator_discards_are_not_used_though_the_relay_offers_them(relay_with):
    relay = relay_with()  # offers PIPELINING and CHUNKING
    transport = SmtpTransport(
        relay.url,
        timeout_seconds=TIMEOUT_SECONDS,
        discard_ehlo_keywords=frozenset({"pipelining", "chunking"}),
    )
    results = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert [r.code for r in results] == [250, 250]
    assert relay.pipelined == [False, False]
    assert "BDAT" not in relay.commands and relay.commands.count("DATA") == 2
