"""``DATA`` on its way while the ``data_sent`` mark commits.

Without CHUNKING the body waits for two things: the mark's commit (a round trip to
the database) and the relay's ``354`` to ``DATA`` (a round trip to the relay). One
after the other they add up; here ``DATA`` is written first and its ``354`` read
once the mark is committed, so the two round trips overlap. The body itself still
leaves only after both: nothing changes for a crash (a mark committed and no body
sent was already ambiguous, and a relay that saw ``DATA`` but no closing dot
delivers nothing).

A mark refused or failed after ``DATA`` went leaves the relay waiting for a body
that must not go: the connection is closed (``RSET`` would be read as body text).

aiosmtplib drops what arrives while no reply is awaited, so the reply is marked as
expected as ``DATA`` is written (as its ``execute_command`` does), and taken from
its protocol when read.
"""

from __future__ import annotations

import aiosmtplib
from aiosmtplib.response import SMTPResponse

from console.transports.smtp_chunking import canonical_body, final_reply


def send_command(client: aiosmtplib.SMTP) -> bool:
    """Write ``DATA`` and expect its reply; False (nothing written) without a connection."""
    protocol = client.protocol
    if protocol is None or not client.is_connected:
        return False
    protocol._response_pending = True  # the 354 may come before it is awaited
    protocol.write(b"DATA\r\n")
    return True


async def send_body(client: aiosmtplib.SMTP, body: bytes) -> SMTPResponse:
    """After ``send_command``: read the ``354``, then send `body` (dot-stuffed, closed by a
    lone dot) and read the final reply (``smtp_chunking.final_reply``)."""
    return await final_reply(client, _stuffed(body), after_start=True)


def _stuffed(body: bytes) -> bytes:
    """`body` as DATA transmits it: CRLF line endings, a dot doubled at a line's start,
    and the closing ``.`` line (what aiosmtplib's ``data`` sends)."""
    message = canonical_body(body)
    if message.startswith(b"."):
        message = b"." + message
    return message.replace(b"\r\n.", b"\r\n..") + b".\r\n"
