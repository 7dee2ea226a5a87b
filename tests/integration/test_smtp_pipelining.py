"""MAIL FROM and RCPT TO in one write when the relay offers PIPELINING (RFC 2920), against
a relay that holds back its reply to MAIL until it sees whether RCPT follows at once.

Each refusal is reported as it was without pipelining (the sender's at MAIL, the
recipient's at RCPT), the connection stays in step with the relay (RSET, the next
message on it), and a relay that does not offer PIPELINING gets one command at a time.
"""

from __future__ import annotations

import asyncio
import threading

import aiosmtplib
import pytest

from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, ENVELOPE, REPLY_READ
from tests.integration.test_smtp_session import outgoing, send_all

TIMEOUT_SECONDS = 2.0
RCPT_WAIT_SECONDS = 0.3  # how long the relay waits for a RCPT sent with MAIL
NEED_MAIL = b"503 5.5.1 Error: need MAIL command\r\n"


class PipeliningRelay:
    """A relay on its own event loop: EHLO offers PIPELINING (or not); MAIL's reply waits
    until RCPT arrives or RCPT_WAIT_SECONDS pass, and ``pipelined`` records which."""

    def __init__(
        self,
        *,
        offer: bool = True,
        split: bool = False,
        mail_replies: dict[int, bytes] | None = None,
        rcpt_replies: dict[str, bytes] | None = None,
    ) -> None:
        self.offer = offer
        self.split = split  # the RCPT reply in a segment of its own, 50 ms after MAIL's
        self.mail_replies = mail_replies or {}  # the nth MAIL (from 1, all connections)
        self.rcpt_replies = rcpt_replies or {}  # by recipient
        self.pipelined: list[bool] = []  # per MAIL: RCPT came before MAIL was answered
        self.commands: list[str] = []
        self.connections = 0
        self.delivered: list[str] = []
        self._mails = 0
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._session, "127.0.0.1", 0)
        )
        self.url = f"smtp://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _session(self, reader, writer) -> None:
        self.connections += 1
        try:
            await self._converse(reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _converse(self, reader, writer) -> None:
        writer.write(b"220 relay.example ESMTP\r\n")
        while line := await reader.readline():
            verb = line[:4].upper()
            self.commands.append(verb.decode())
            if verb == b"EHLO":
                offered = b"250-PIPELINING\r\n" if self.offer else b""
                writer.write(b"250-relay.example\r\n" + offered + b"250 8BITMIME\r\n")
            elif verb == b"MAIL":
                if not await self._envelope(reader, writer):
                    return
            elif verb == b"RCPT":  # after a MAIL answered on its own
                writer.write(self._rcpt_reply(line, b"250 2.1.0 Ok\r\n"))
            elif verb == b"DATA":
                writer.write(b"354 go on\r\n")
                while (await reader.readline()) != b".\r\n":
                    pass
                self.delivered.append("ok")
                writer.write(b"250 2.0.0 Ok: queued as Q1\r\n")
            elif verb in (b"RSET", b"NOOP"):
                writer.write(b"250 2.0.0 Ok\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                return

    async def _envelope(self, reader, writer) -> bool:
        """Answer MAIL, and RCPT if it came with it; False when the relay hangs up."""
        self._mails += 1
        mail_reply = self.mail_replies.get(self._mails, b"250 2.1.0 Ok\r\n")
        try:
            rcpt = await asyncio.wait_for(reader.readline(), RCPT_WAIT_SECONDS)
        except TimeoutError:
            rcpt = None
        self.pipelined.append(rcpt is not None)
        if rcpt is not None:
            self.commands.append(rcpt[:4].upper().decode())
        writer.write(mail_reply)
        if mail_reply.startswith(b"421"):
            await writer.drain()
            return False
        if rcpt is not None:
            if self.split:
                await writer.drain()
                await asyncio.sleep(0.05)
            refused = not mail_reply.startswith(b"250")
            writer.write(NEED_MAIL if refused else self._rcpt_reply(rcpt, b"250 2.1.5 Ok\r\n"))
        return True

    def _rcpt_reply(self, line: bytes, accepted: bytes) -> bytes:
        recipient = line.partition(b"<")[2].partition(b">")[0].decode()
        return self.rcpt_replies.get(recipient, accepted)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@pytest.fixture
def relay_with(request):
    relays: list[PipeliningRelay] = []

    def make(**options) -> PipeliningRelay:
        relays.append(PipeliningRelay(**options))
        return relays[-1]

    yield make
    for relay in relays:
        relay.stop()


def emails(*recipients: str):
    return [outgoing(recipient, number=n) for n, recipient in enumerate(recipients, 1)]


@pytest.mark.parametrize("split", [False, True], ids=["replies-together", "replies-apart"])
def test_mail_and_rcpt_go_together_when_the_relay_offers_pipelining(relay_with, split):
    relay = relay_with(split=split)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    results = send_all(transport, emails("ada@example.com", "bob@example.com", "cy@example.com"))
    assert [(r.stage, r.code) for r in results] == [(REPLY_READ, 250)] * 3
    assert relay.pipelined == [True, True, True]
    assert relay.connections == 1 and len(relay.delivered) == 3


def test_a_relay_that_does_not_offer_pipelining_gets_one_command_at_a_time(relay_with):
    relay = relay_with(offer=False)
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    results = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert [r.code for r in results] == [250, 250]
    assert relay.pipelined == [False, False]


def test_a_refused_sender_is_reported_at_mail_and_the_connection_goes_on(relay_with):
    relay = relay_with(mail_replies={1: b"550 5.7.1 Sender address rejected\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("ada@example.com", "bob@example.com"))
    assert (refused.stage, refused.code, refused.error_type) == (
        ENVELOPE,
        550,
        aiosmtplib.SMTPSenderRefused.__name__,
    )
    assert "Sender address rejected" in refused.reply_text
    assert (accepted.stage, accepted.code) == (REPLY_READ, 250)
    assert relay.connections == 1 and relay.delivered == ["ok"]
    assert relay.commands.count("RSET") == 1


def test_a_refused_recipient_is_reported_at_rcpt_and_the_connection_goes_on(relay_with):
    relay = relay_with(rcpt_replies={"gone@example.com": b"550 5.1.1 No such user\r\n"})
    transport = SmtpTransport(relay.url, timeout_seconds=TIMEOUT_SECONDS)
    refused, accepted = send_all(transport, emails("gone@example.com", "bob@example.com"))
    assert (refused.stage, refused.code, refused.error_type) == (
        ENVELOPE,
        550,
        aiosmtplib.SMTPRecipientRefused.__name__,
    )
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
        stages.append((stage, list(relay.commands)))
        if stage == DATA_SENT:
            await asyncio.sleep(0.05)  # a slow mark: the relay must not have DATA yet

    async def run():
        result = await transport.send(outgoing("ada@example.com"), on_stage)
        await transport.close()
        return result

    assert asyncio.run(run()).code == 250
    data_sent_commands = dict(stages)[DATA_SENT]
    assert data_sent_commands[-2:] == ["MAIL", "RCPT"] and "DATA" not in data_sent_commands
