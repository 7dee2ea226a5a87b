"""MAIL FROM and RCPT TO in one write when the relay offers PIPELINING (RFC 2920).

A message then costs three round trips to the relay instead of four (DATA still
waits for RCPT's reply, and the body for the ``data_sent`` mark).

aiosmtplib reads one reply per command it sends: what arrives after a reply stays
in its protocol's buffer, and data arriving while no reply is awaited is
dropped. So the second reply is taken from that buffer when it came with the
first, and awaited as the next reply otherwise; that wait begins in the same
step of the event loop that received the first reply, so nothing can arrive in
between. With an aiosmtplib whose protocol lacks that buffer reader, MAIL and
RCPT go one at a time, as before.
"""

from __future__ import annotations

import re

import aiosmtplib
from aiosmtplib.response import SMTPResponse

_CLOSING_CODE = 421  # the relay closes the channel after this reply
_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")  # what aiosmtplib refuses in a command


def offers_pipelining(client: aiosmtplib.SMTP) -> bool:
    """The relay said PIPELINING in its EHLO reply, and this aiosmtplib can read two replies."""
    protocol = client.protocol
    return (
        protocol is not None
        and client.supports_extension("pipelining")
        and callable(getattr(protocol, "_read_response_from_buffer", None))
    )


async def mail_and_rcpt(
    client: aiosmtplib.SMTP, mail: bytes, rcpt: bytes
) -> tuple[SMTPResponse, SMTPResponse | None]:
    """Send the MAIL and RCPT command lines (without CRLF) in one write; their replies.

    The RCPT reply is None when the relay closed the channel at MAIL (421), or
    refused MAIL and hung up before answering RCPT: the MAIL reply says it all.
    A broken connection or a timeout closes the client, as aiosmtplib does.
    """
    protocol = client.protocol
    if protocol is None:
        raise aiosmtplib.SMTPServerDisconnected("Server not connected")
    if _CONTROL.search(mail) or _CONTROL.search(rcpt):
        raise ValueError("Command arg contains a prohibited control character")
    try:
        protocol.write(mail + b"\r\n" + rcpt + b"\r\n")
        mail_reply = await protocol.read_response(timeout=None)
        if mail_reply.code == _CLOSING_CODE:
            client.close()
            return mail_reply, None
        refused = mail_reply.code != aiosmtplib.SMTPStatus.completed
        rcpt_reply = await _next_reply(client, refused_mail=refused)
    except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
        client.close()
        raise
    if rcpt_reply is not None and rcpt_reply.code == _CLOSING_CODE:
        client.close()
    return mail_reply, rcpt_reply


async def _next_reply(client: aiosmtplib.SMTP, refused_mail: bool) -> SMTPResponse | None:
    """The reply after the one just read: from the buffer if it came along, else awaited."""
    protocol = client.protocol
    if protocol is None:  # the relay hung up right after its first reply
        if refused_mail:
            return None
        raise aiosmtplib.SMTPServerDisconnected("Connection lost")
    buffered = protocol._read_response_from_buffer()
    if buffered is not None:
        return buffered
    try:
        return await protocol.read_response(timeout=None)
    except aiosmtplib.SMTPServerDisconnected:
        if refused_mail:
            client.close()
            return None
        raise
