"""The scripted SMTP server throttles by arrival, as a provider over its limit does:
``"#N"`` answers the Nth body to arrive, whoever it is for."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage

import aiosmtplib
import pytest

from tests.support.smtp_script import Script
from tests.support.smtp_server import ScriptedSMTPServer

THROTTLING = "454 4.7.0 Throttling failure: Maximum sending rate exceeded"


def message(n: int) -> EmailMessage:
    email = EmailMessage()
    email["From"], email["To"] = "shop@example.com", f"buyer{n}@example.com"
    email["Message-ID"], email["Subject"] = f"<m{n}@example.com>", "Order"
    email.set_content("Thanks")
    return email


async def send_all(port: int, count: int) -> list[int]:
    codes = []
    async with aiosmtplib.SMTP(hostname="127.0.0.1", port=port) as client:
        for n in range(count):
            try:
                await client.send_message(message(n))
                codes.append(250)
            except aiosmtplib.SMTPDataError as error:
                codes.append(error.code)
    return codes


def test_the_nth_body_to_arrive_gets_its_scripted_reply_whoever_it_is_for():
    script = {"#2": [THROTTLING], "#3": [THROTTLING], "buyer3@example.com": ["451", "250"]}
    with ScriptedSMTPServer(script=script) as server:
        codes = asyncio.run(send_all(server.port, 5))
        received = server.received
    assert codes == [250, 454, 454, 451, 250]
    assert [r.result for r in received] == ["250", "454", "454", "451", "250"]
    assert [r.recipient for r in received][1:3] == ["buyer1@example.com", "buyer2@example.com"]


@pytest.mark.parametrize("rule", [("#0", ["454"]), ("#1", ["rcpt:550"]), ("#1", ["9xx"])])
def test_an_arrival_rule_needs_a_number_from_one_and_a_body_reply(rule):
    with pytest.raises(ValueError):
        Script(dict([rule]))
