"""The body as one ``BDAT <size> LAST`` chunk when the relay offers CHUNKING (RFC 3030).

``DATA`` costs a round trip before the body (the relay's ``354``); ``BDAT`` carries
the body behind the command and gets one reply, the same final reply ``DATA``
gets after its closing dot. With PIPELINING as well, a message costs two round
trips to the relay instead of four. The body needs no dot-stuffing; its line
endings are made CRLF as aiosmtplib makes them for ``DATA``, so the relay gets the
same message either way.
"""

from __future__ import annotations

import re

import aiosmtplib
from aiosmtplib.response import SMTPResponse

_LINE_ENDING = re.compile(rb"\r\n|\n|\r(?!\n)")


def offers_chunking(client: aiosmtplib.SMTP) -> bool:
    """The relay said CHUNKING in its EHLO reply."""
    return client.protocol is not None and client.supports_extension("chunking")


def canonical_body(body: bytes) -> bytes:
    """`body` with CRLF line endings, ending in CRLF (what DATA would transmit, unstuffed)."""
    body = _LINE_ENDING.sub(b"\r\n", body)
    return body if body.endswith(b"\r\n") else body + b"\r\n"


async def send_last_chunk(client: aiosmtplib.SMTP, body: bytes) -> SMTPResponse:
    """Send `body` as ``BDAT <size> LAST``; the relay's reply, ``SMTPDataError`` unless 250."""
    message = canonical_body(body)
    return await final_reply(client, b"BDAT %d LAST\r\n" % len(message) + message)


async def final_reply(client: aiosmtplib.SMTP, payload: bytes) -> SMTPResponse:
    """Write `payload` and read the relay's final reply; ``SMTPDataError`` for a reply other
    than 250. A broken connection or a timeout closes the client, as aiosmtplib's ``data``
    does."""
    protocol = client.protocol
    if protocol is None:
        raise aiosmtplib.SMTPServerDisconnected("Connection lost")
    try:
        protocol.write(payload)
        reply = await protocol.read_response(timeout=None)
    except (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPTimeoutError):
        client.close()
        raise
    if reply.code != aiosmtplib.SMTPStatus.completed:
        raise aiosmtplib.SMTPDataError(reply.code, reply.message)
    return reply
