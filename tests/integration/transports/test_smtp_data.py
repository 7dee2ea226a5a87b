"""DATA after the ``data_sent`` mark, against a raw relay without CHUNKING: the body waits
for its mark, a refused mark sends no DATA (the envelope is reset and the connection
kept), and a DATA the relay refuses is reported at ``data_sent``."""

from __future__ import annotations

import asyncio

import pytest

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
def test_a_mark_refused_sends_no_data_and_the_connection_goes_on(relay_with, pipelining):
    relay = relay_with(pipelining=pipelining)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    emails = [outgoing("ada@example.com", number=1), outgoing("bob@example.com", number=2)]
    refused, sent = send_each(transport, emails, refusing_the_mark_of({1}))
    assert (refused.stage, refused.error_type) == (ENVELOPE, "MarkRefused")
    assert (sent.stage, sent.code) == (REPLY_READ, 250)
    assert relay.commands.count("DATA") == 1, "DATA only for the email whose mark held"
    assert relay.commands.count("RSET") == 1 and relay.connections == 1
    assert len(relay.bodies) == 1 and relay.delivered == ["ok"] and relay.unfinished == []


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
