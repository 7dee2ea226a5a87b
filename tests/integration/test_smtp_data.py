"""DATA on its way while the ``data_sent`` mark commits (``transports.smtp_data``), against
a raw relay: the body still waits for the mark, a mark refused after DATA went leaves
no message at the relay (the connection is closed, not RSET), a DATA the relay refuses
is reported as before, and the body is the one aiosmtplib's ``data`` would send."""

from __future__ import annotations

import asyncio

import pytest
from aiosmtplib.protocol import PERIOD_REGEX, normalize_message_line_endings

from console.transports import smtp_data
from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, ENVELOPE, REPLY_READ
from tests.support.smtp_relay import relays
from tests.support.transport_sends import outgoing

TIMEOUT_SECONDS = 2.0


class MarkRefused(RuntimeError):
    """What a stage callback raises for a mark it refuses (a recipient suppressed)."""


@pytest.fixture
def relay_with():
    with relays() as start:
        yield start


def send_each(transport: SmtpTransport, emails, on_stage):
    async def run():
        results = [await transport.send(email, on_stage) for email in emails]
        await transport.close()
        return results

    return asyncio.run(run())


def refusing_the_mark_of(refused: set[int], seen: list | None = None):
    """A stage callback: a slow mark (the relay's 354 arrives meanwhile), refused for the
    attempts in `refused`."""

    async def on_stage(email, stage):
        if stage == DATA_SENT:
            await asyncio.sleep(0.05)
            if seen is not None:
                seen.append(email.attempt_id)
            if email.attempt_id in refused:
                raise MarkRefused(f"attempt {email.attempt_id}: mark refused")

    return on_stage


@pytest.mark.parametrize("pipelining", [True, False], ids=["pipelining", "one-at-a-time"])
def test_a_mark_refused_after_data_went_leaves_no_message_and_the_next_gets_a_new_connection(
    relay_with, pipelining
):
    relay = relay_with(pipelining=pipelining)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    emails = [outgoing("ada@example.com", number=1), outgoing("bob@example.com", number=2)]
    refused, sent = send_each(transport, emails, refusing_the_mark_of({1}))
    assert (refused.stage, refused.error_type) == (ENVELOPE, "MarkRefused")
    assert (sent.stage, sent.code) == (REPLY_READ, 250)
    assert "RSET" not in relay.commands  # it would have been read as the body's first line
    assert relay.connections == 2 and transport.reconnects == 1
    assert len(relay.bodies) == 1 and relay.delivered == ["ok"]
    assert relay.unfinished == [b""]  # the first DATA got its 354, then not a line


def test_a_data_command_refused_is_reported_at_data_sent_and_the_connection_kept(relay_with):
    relay = relay_with(data_replies={1: b"451 4.3.0 try again later\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    emails = [outgoing("ada@example.com", number=1), outgoing("bob@example.com", number=2)]
    refused, sent = send_each(transport, emails, refusing_the_mark_of(set()))
    assert (refused.stage, refused.code, refused.error_type) == (DATA_SENT, 451, "SMTPDataError")
    assert (sent.stage, sent.code) == (REPLY_READ, 250)
    assert relay.connections == 1 and relay.commands.count("RSET") == 1
    assert relay.delivered == ["ok"]


def test_every_mark_is_awaited_before_its_body(relay_with):
    relay = relay_with(pipelining=False)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    bodies_at_mark: list[int] = []

    async def on_stage(email, stage):
        if stage == DATA_SENT:
            await asyncio.sleep(0.05)
            bodies_at_mark.append(len(relay.bodies))

    emails = [outgoing(f"r{n}@example.com", number=n) for n in range(1, 4)]
    results = send_each(transport, emails, on_stage)
    assert [r.code for r in results] == [250, 250, 250]
    assert bodies_at_mark == [0, 1, 2]  # each body arrived only after its own mark


@pytest.mark.parametrize(
    "body",
    [
        b"Subject: a\r\n\r\nplain\r\n",
        b".starts with a dot\r\n..two\r\n.\r\nend",
        b"lone\nline\rendings\r\n.\n.x",
        b"",
    ],
    ids=["plain", "dots", "line-endings", "empty"],
)
def test_the_body_is_sent_as_aiosmtplib_data_sends_it(body):
    expected = PERIOD_REGEX.sub(b"..", normalize_message_line_endings(body)) + b".\r\n"
    assert smtp_data._stuffed(body) == expected
