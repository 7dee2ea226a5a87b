"""Outgoing emails built by hand, and a transport made to send them in order."""

from __future__ import annotations

import asyncio

from console.transports.base import OutgoingEmail
from console.transports.smtp import SmtpTransport


def outgoing(recipient: str, body: bytes | None = None, number: int = 1) -> OutgoingEmail:
    message_id = f"<m{number}@example.com>"
    raw = (
        body
        or (
            f"From: shop@example.com\r\nTo: {recipient}\r\nSubject: hi\r\n"
            f"Message-ID: {message_id}\r\n\r\nhello\r\n"
        ).encode()
    )
    return OutgoingEmail(
        intent_id=number,
        attempt_id=number,
        message_id=message_id,
        idempotency_key=f"k{number}",
        mail_from="shop@example.com",
        envelope_from="shop@example.com",
        recipient=recipient,
        subject="hi",
        text="hello",
        html=None,
        created_at_epoch=0.0,
        as_bytes=lambda: raw,
    )


async def _stage(email, stage):
    return None


def send_all(transport: SmtpTransport, emails: list[OutgoingEmail], close: bool = True):
    async def run():
        results = [await transport.send(one, _stage) for one in emails]
        if close:
            await transport.close()
        return results

    return asyncio.run(run())


def emails(*recipients: str):
    return [outgoing(recipient, number=n) for n, recipient in enumerate(recipients, 1)]
