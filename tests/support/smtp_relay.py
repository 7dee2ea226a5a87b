"""A raw SMTP relay for the transport's tests of SMTP extensions (PIPELINING, CHUNKING),
with the timing a scripted aiosmtpd server cannot show: it answers MAIL only once it
has seen whether RCPT came with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from tests.support.loop_server import LoopServer

RCPT_WAIT_SECONDS = 0.3  # how long the relay waits for a RCPT sent with MAIL
NEED_MAIL = b"503 5.5.1 Error: need MAIL command\r\n"


class RawRelay(LoopServer):
    """A relay on its own event loop: EHLO offers PIPELINING and CHUNKING (or not);
    MAIL's reply waits until RCPT arrives or RCPT_WAIT_SECONDS pass, and ``pipelined``
    records which; a body comes after DATA or as BDAT chunks, ``bodies`` keeps each."""

    def __init__(
        self,
        *,
        pipelining: bool = True,
        chunking: bool = False,
        split: bool = False,
        mail_replies: dict[int, bytes] | None = None,
        rcpt_replies: dict[str, bytes] | None = None,
        body_replies: dict[int, bytes] | None = None,
        data_replies: dict[int, bytes] | None = None,
        hang_up_after_mail: frozenset[int] = frozenset(),
    ) -> None:
        self.pipelining = pipelining  # EHLO says PIPELINING
        self.chunking = chunking  # EHLO says CHUNKING: BDAT accepted
        self.body_replies = body_replies or {}  # the nth body (from 1): its reply, or b"hangup"
        self.bodies: list[bytes] = []
        self.data_replies = data_replies or {}  # the nth DATA (from 1): its reply instead of 354
        self.unfinished: list[bytes] = []  # bodies cut off by a hang-up before their closing dot
        self._datas = 0
        self.split = split  # the RCPT reply in a segment of its own, 50 ms after MAIL's
        self.mail_replies = mail_replies or {}  # the nth MAIL (from 1, all connections)
        self.hang_up_after_mail = hang_up_after_mail  # the nth MAIL: its reply, then hang up
        self.rcpt_replies = rcpt_replies or {}  # by recipient
        self.pipelined: list[bool] = []  # per MAIL: RCPT came before MAIL was answered
        self.commands: list[str] = []
        self.connections = 0
        self.delivered: list[str] = []
        self._mails = 0
        self._chunks: list[bytes] = []
        super().__init__()
        self.url = f"smtp://127.0.0.1:{self.port}"

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
                offered = b"250-PIPELINING\r\n" if self.pipelining else b""
                offered += b"250-CHUNKING\r\n" if self.chunking else b""
                writer.write(b"250-relay.example\r\n" + offered + b"250 8BITMIME\r\n")
            elif verb == b"MAIL":
                if not await self._envelope(reader, writer):
                    return
            elif verb == b"RCPT":  # after a MAIL answered on its own
                writer.write(self._rcpt_reply(line, b"250 2.1.0 Ok\r\n"))
            elif verb == b"DATA":
                self._datas += 1
                refusal = self.data_replies.get(self._datas)
                if refusal is not None:
                    writer.write(refusal)
                    continue
                writer.write(b"354 go on\r\n")
                lines = []
                while (line := await reader.readline()) != b".\r\n":
                    if not line:  # the client hung up before the closing dot: no message
                        self.unfinished.append(b"".join(lines))
                        return
                    lines.append(line[1:] if line.startswith(b"..") else line)
                if not self._answer_body(b"".join(lines), writer):
                    return
            elif verb == b"BDAT":
                words = line.split()  # BDAT <size> [LAST]
                self._chunks.append(await reader.readexactly(int(words[1])))
                if words[-1].upper() != b"LAST":
                    writer.write(b"250 2.0.0 chunk received\r\n")
                elif not self._answer_body(b"".join(self._chunks), writer):
                    return
            elif verb in (b"RSET", b"NOOP"):
                self._chunks = []
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
        if mail_reply.startswith(b"421") or self._mails in self.hang_up_after_mail:
            await writer.drain()
            return False
        if rcpt is not None:
            if self.split:
                await writer.drain()
                await asyncio.sleep(0.05)
            refused = not mail_reply.startswith(b"250")
            writer.write(NEED_MAIL if refused else self._rcpt_reply(rcpt, b"250 2.1.5 Ok\r\n"))
        return True

    def _answer_body(self, body: bytes, writer) -> bool:
        """Keep the body and answer it as scripted; False when the relay hangs up."""
        self._chunks = []
        self.bodies.append(body)
        number = len(self.bodies)
        reply = self.body_replies.get(number, b"250 2.0.0 Ok: queued as QUEUED%d\r\n" % number)
        if reply == b"hangup":
            writer.transport.abort()
            return False
        if reply.startswith(b"250"):
            self.delivered.append("ok")
        writer.write(reply)
        return True

    def _rcpt_reply(self, line: bytes, accepted: bytes) -> bytes:
        recipient = line.partition(b"<")[2].partition(b">")[0].decode()
        return self.rcpt_replies.get(recipient, accepted)


@contextlib.contextmanager
def relays(**defaults) -> Iterator:
    """Start relays with `defaults` and any options of their own; stop them all after."""
    started: list[RawRelay] = []

    def start(**options) -> RawRelay:
        started.append(RawRelay(**{**defaults, **options}))
        return started[-1]

    try:
        yield start
    finally:
        for relay in started:
            relay.stop()
