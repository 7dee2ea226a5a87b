"""The SMTP transport as a good citizen, against the scripted aiosmtpd server: the EHLO
name, SIZE= in MAIL FROM, one connection carried through refusals (RSET), QUIT on close,
a broken connection replaced and counted."""

from __future__ import annotations

import email
import email.policy
import threading
import time

import pytest
from prometheus_client import generate_latest

from console.core.classify import MESSAGE_TOO_BIG, SMTPUTF8_NOT_OFFERED, classify
from console.transports.smtp import SmtpTransport
from console.vocabulary import DATA_SENT, ENVELOPE, PERMANENT, REPLY_READ
from tests.support.loop_server import LoopServer
from tests.support.smtp_server import ScriptedSMTPServer
from tests.support.transport_sends import outgoing, send_all

TIMEOUT_SECONDS = 2.0


def test_ehlo_says_the_configured_name():
    with ScriptedSMTPServer() as server:
        transport = SmtpTransport(server.url, ehlo_name="mta.example.org")
        send_all(transport, [outgoing("ada@example.com")])
        assert server.handler.ehlo_names == ["mta.example.org"]


def test_ehlo_defaults_to_a_dotted_name_or_an_address_literal():
    with ScriptedSMTPServer() as server:
        transport = SmtpTransport(server.url)
        send_all(transport, [outgoing("ada@example.com")])
        (name,) = server.handler.ehlo_names
        assert name.startswith("[") or ("." in name and name != "localhost.localdomain"), name


def test_size_is_declared_when_offered():
    with ScriptedSMTPServer(size_limit=100_000) as server:
        results = send_all(SmtpTransport(server.url), [outgoing("ada@example.com")])
        assert results[0].code == 250
        (received,) = server.received
        size = len(outgoing("ada@example.com").as_bytes())
        assert f"SIZE={size}" in received.mail_options


def test_a_message_over_the_advertised_size_fails_before_data():
    big = b"Subject: big\r\n\r\n" + b"x" * 2000 + b"\r\n"
    with ScriptedSMTPServer(size_limit=1000) as server:
        transport = SmtpTransport(server.url)
        results = send_all(
            transport, [outgoing("ada@example.com", big), outgoing("bob@example.com", number=2)]
        )
        too_big, fine = results
        assert too_big.stage == ENVELOPE and too_big.error_type == MESSAGE_TOO_BIG
        assert "1000" in too_big.error and classify(too_big).outcome == PERMANENT
        assert fine.stage == REPLY_READ and fine.code == 250
        assert [r.recipient for r in server.received] == ["bob@example.com"]
        assert server.connections_opened == 1


def test_refusals_are_followed_by_rset_on_the_same_connection_and_quit_on_close():
    script = {
        "gone@example.com": ["rcpt:550"],
        "later@example.com": ["rcpt:451"],
        "spam@example.com": ["554"],
    }
    with ScriptedSMTPServer(script=script) as server:
        transport = SmtpTransport(server.url, timeout_seconds=TIMEOUT_SECONDS)
        recipients = ["gone@example.com", "ada@example.com", "later@example.com"]
        recipients += ["spam@example.com", "bob@example.com"]
        emails = [outgoing(r, number=n) for n, r in enumerate(recipients, 1)]
        results = send_all(transport, emails)
        assert [r.code for r in results] == [550, 250, 451, 554, 250]
        assert server.connections_opened == 1
        assert server.handler.commands["RSET"] == 3
        assert server.handler.commands["QUIT"] == 1
        assert transport.reconnects == 0


def test_a_broken_connection_is_replaced_and_counted():
    script = {"drop@example.com": ["hangup"], "busy@example.com": ["421"]}
    with ScriptedSMTPServer(script=script, stall_seconds=0.5) as server:
        transport = SmtpTransport(server.url, timeout_seconds=TIMEOUT_SECONDS)
        recipients = ["drop@example.com", "ada@example.com", "busy@example.com"]
        recipients += ["bob@example.com"]
        emails = [outgoing(r, number=n) for n, r in enumerate(recipients, 1)]
        results = send_all(transport, emails)
        assert [r.code for r in results] == [None, 250, 421, 250]
        assert server.connections_opened == 3
        assert transport.reconnects == 2


def test_a_relay_without_smtputf8_fails_that_recipient_only_and_keeps_the_connection():
    with ScriptedSMTPServer(smtputf8=False) as server:
        transport = SmtpTransport(server.url)
        results = send_all(
            transport, [outgoing("zoë@example.com"), outgoing("ada@example.com", number=2)]
        )
        refused, fine = results
        assert refused.error_type == SMTPUTF8_NOT_OFFERED and refused.stage == ENVELOPE
        classification = classify(refused)
        assert classification.outcome == PERMANENT and "SMTPUTF8" in classification.reason
        assert fine.code == 250 and server.connections_opened == 1


def test_an_8bit_message_declares_body_8bitmime_and_smtputf8():
    raw = "From: shop@example.com\r\nTo: zoë@example.com\r\nSubject: hi\r\n\r\nhi\r\n".encode()
    with ScriptedSMTPServer() as server:
        results = send_all(SmtpTransport(server.url), [outgoing("zoë@example.com", raw)])
        assert results[0].code == 250
        (received,) = server.received
        assert "SMTPUTF8" in received.mail_options and "BODY=8BITMIME" in received.mail_options
        parsed = email.message_from_bytes(received.content, policy=email.policy.default)
        assert parsed["To"] == "zoë@example.com"


@pytest.mark.parametrize("limit", [0, None])
def test_no_size_limit_means_no_refusal(limit):
    with ScriptedSMTPServer(size_limit=limit) as server:
        results = send_all(SmtpTransport(server.url), [outgoing("ada@example.com")])
        assert results[0].code == 250


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_worker_counts_reconnects_in_metrics(make_worker, session_factory, clock):
    from console.outbox import enqueue
    from console.worker import reporting

    script = {"drop@example.com": ["hangup"]}
    with ScriptedSMTPServer(script=script, stall_seconds=0.5) as server:
        with session_factory() as session:
            for number, to in enumerate(["drop@example.com", "ada@example.com"]):
                params = {"name": "Ada", "login_url": "https://shop.example/login"}
                enqueue(session, key=f"w:{number}", to=to, template="welcome", params=params)
            session.commit()
        before = reporting.SMTP_RECONNECTS._value.get()
        transport = SmtpTransport(server.url, timeout_seconds=TIMEOUT_SECONDS)
        clock.advance(60)
        make_worker(transport).run_once()
        assert server.connections_opened == 2
        assert reporting.SMTP_RECONNECTS._value.get() - before == 1
        exposition = generate_latest(reporting.PROCESS_REGISTRY).decode()
        assert "console_smtp_reconnects_total" in exposition


@pytest.mark.parametrize(
    "behaviour,stage", [("rcpt:stall", ENVELOPE), ("stall", DATA_SENT)], ids=["envelope", "data"]
)
def test_a_stage_that_outlasts_the_timeout_is_a_read_timeout_and_the_connection_is_replaced(
    behaviour, stage
):
    # the relay stalls far longer than the timeout, which is far longer than any step of a
    # loaded machine: only the timeout can end the slow stage, and nothing else meets it
    timeout, stall = 5.0, 60.0
    with ScriptedSMTPServer(
        script={"slow@example.com": [behaviour]}, stall_seconds=stall
    ) as server:
        transport = SmtpTransport(server.url, timeout_seconds=timeout)
        emails = [outgoing("ada@example.com"), outgoing("slow@example.com", number=2)]
        emails.append(outgoing("bob@example.com", number=3))
        started = time.perf_counter()
        first, slow, after = send_all(transport, emails)
        assert time.perf_counter() - started < stall, "the stall ended the stage, not the timeout"
        assert (first.code, after.code) == (250, 250)
        assert (slow.stage, slow.code, slow.error_type) == (stage, None, "SMTPReadTimeoutError")
        assert timeout * 1000 <= slow.duration_ms < stall * 1000
        assert server.connections_opened == 2 and transport.reconnects == 1


class _DropThenSilent(LoopServer):
    """A relay that takes one email, hangs up at the next MAIL, then accepts a connection
    and never greets it: the reconnect within the envelope's deadline never completes."""

    def __init__(self) -> None:
        self.connections = 0
        self.silent_closed_by_client = threading.Event()
        super().__init__()

    async def _session(self, reader, writer) -> None:
        self.connections += 1
        try:
            await self._converse(reader, writer)
        finally:
            writer.close()

    async def _converse(self, reader, writer) -> None:
        if self.connections > 1:  # silent: wait for the client to give up
            await reader.read()
            self.silent_closed_by_client.set()
            return
        writer.write(b"220 relay.example ESMTP\r\n")
        mails = 0
        while line := await reader.readline():
            verb = line[:4].upper()
            if verb == b"MAIL":
                mails += 1
                if mails == 2:
                    return
            if verb == b"DATA":
                writer.write(b"354 go on\r\n")
                while (await reader.readline()) != b".\r\n":
                    pass
                writer.write(b"250 2.0.0 Ok: queued as Q1\r\n")
            elif verb in (b"EHLO", b"MAIL", b"RCPT", b"RSET", b"NOOP"):
                writer.write(b"250 ok\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                return


def test_a_reconnect_the_stages_deadline_cuts_short_leaves_no_connection_open():
    relay = _DropThenSilent()
    try:
        transport = SmtpTransport(f"smtp://127.0.0.1:{relay.port}", timeout_seconds=1.0)
        first, second = send_all(
            transport, [outgoing("ada@example.com"), outgoing("bob@example.com", number=2)]
        )
        assert first.code == 250
        assert (second.stage, second.error_type) == (ENVELOPE, "SMTPReadTimeoutError")
        assert relay.connections == 2
        assert relay.silent_closed_by_client.wait(2), "the half-open connection was left open"
    finally:
        relay.stop()
