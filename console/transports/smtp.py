"""SMTP transport on aiosmtplib: reused connections, a timeout per stage, one result per email.

The low-level calls (EHLO, MAIL, RCPT, DATA) let the worker record ``DATA_SENT``
before the body leaves the process. MAIL FROM declares ``SIZE=`` when the relay
offers SIZE (a message over its limit is refused here, before MAIL), ``SMTPUTF8``
for a non-ASCII address and ``BODY=8BITMIME`` for 8-bit content; MAIL and RCPT go
in one write to a relay that offers PIPELINING (``smtp_pipelining``), and the body goes
as one BDAT chunk to a relay that offers CHUNKING (``smtp_chunking``), else after DATA;
DATA or BDAT goes only once the ``data_sent`` mark is committed. The envelope
(MAIL + RCPT) and the data (DATA, the body, the reply) each have ``timeout_seconds``
as a whole: one deadline a stage rather than a timer a command. A refusal the
relay answered leaves the connection usable: ``RSET`` and the next email goes on it;
a connection that broke (hang-up, timeout, 421) is closed and replaced, and counted
in ``reconnects``. Closing says ``QUIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import time
from collections.abc import Awaitable
from email.utils import parseaddr
from typing import TypeVar

import aiosmtplib

from console.core.classify import MESSAGE_TOO_BIG, SMTPUTF8_NOT_OFFERED
from console.core.send_result import SendResult
from console.transports import smtp_chunking as chunking
from console.transports import smtp_pipelining as pipelining
from console.transports.base import OutgoingEmail, StageCallback
from console.transports.smtp_endpoint import SmtpEndpoint, ehlo_name_for
from console.transports.smtp_path import smtp_path
from console.vocabulary import CLAIMED, CONNECTING, DATA_SENT, ENVELOPE, REPLY_READ

__all__ = ["SmtpEndpoint", "SmtpTransport", "describe_failure", "envelope_address"]

_QUEUE_ID = re.compile(r"(?:queued as|id=|^(?:\d\.\d\.\d+\s+)?ok)\s*([A-Za-z0-9._@<>-]{4,})", re.I)
_CLOSING_CODE = 421  # the relay closes the channel after this reply
_RECIPIENT_ACCEPTED = (aiosmtplib.SMTPStatus.completed, aiosmtplib.SMTPStatus.will_forward)
_QUIT_SECONDS = 2.0
T = TypeVar("T")


def provider_id_from_reply(reply_text: str | None) -> str | None:
    """Return the relay's queue id from a 250 reply ("queued as ABC", "id=...", "Ok ...")."""
    match = _QUEUE_ID.search(reply_text or "")
    return match.group(1) if match else None


def describe_failure(
    error: BaseException, stage: str, duration_ms: int | None = None
) -> SendResult:
    """Turn an aiosmtplib (or socket) error raised at `stage` into a SendResult."""
    code: int | None = None
    reply_text: str | None = None
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused) and error.recipients:
        code, reply_text = error.recipients[0].code, error.recipients[0].message
    elif isinstance(error, aiosmtplib.SMTPResponseException):
        code, reply_text = error.code, error.message
    return SendResult(
        stage=stage,
        code=code,
        reply_text=reply_text,
        error=f"{type(error).__name__}: {error}"[:500],
        error_type=type(error).__name__,
        duration_ms=duration_ms,
    )


def _needs_smtputf8(*addresses: str) -> bool:
    return not all(address.isascii() for address in addresses)


async def _send_body(client: aiosmtplib.SMTP, body: bytes) -> aiosmtplib.SMTPResponse:
    """The body as one BDAT chunk to a relay that offers CHUNKING, else after DATA."""
    if chunking.offers_chunking(client):
        return await chunking.send_last_chunk(client, body)
    return await client.data(body, timeout=None)


def _leaves_connection_usable(error: BaseException) -> bool:
    """Whether the relay answered a refusal and kept the session (so RSET may go on it)."""
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        return all(r.code != _CLOSING_CODE for r in error.recipients)
    if isinstance(error, aiosmtplib.SMTPResponseException):
        return error.code != _CLOSING_CODE
    return not isinstance(error, aiosmtplib.SMTPException | OSError | asyncio.TimeoutError)


def size_limit(client: aiosmtplib.SMTP) -> int | None:
    """The relay's advertised SIZE limit in bytes; None when it offers none (or 0: no limit)."""
    if not client.supports_extension("size"):
        return None
    value = client.esmtp_extensions.get("size", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


class SmtpTransport:
    """Send emails over up to `connections` reused SMTP connections."""

    def __init__(
        self,
        endpoint: SmtpEndpoint | str,
        *,
        connections: int = 1,
        timeout_seconds: float = 30.0,
        tls_context: ssl.SSLContext | None = None,
        ehlo_name: str | None = None,
        local_hostname: str | None = None,  # the former name of ehlo_name
        discard_ehlo_keywords: frozenset[str] = frozenset(),
    ) -> None:
        self.endpoint = SmtpEndpoint.from_url(endpoint) if isinstance(endpoint, str) else endpoint
        self.connections = connections
        self.timeout_seconds = timeout_seconds
        self._tls_context = tls_context
        self.ehlo_name = ehlo_name_for(self.endpoint, ehlo_name or local_hostname)
        # extensions the relay offers that are not to be used (a relay that mishandles them)
        self.discard_ehlo_keywords = frozenset(k.lower() for k in discard_ehlo_keywords)
        self.reconnects = 0  # connections opened to replace one an error broke
        self._lost = 0  # connections lost to errors and not yet replaced
        self._idle: list[aiosmtplib.SMTP] = []
        self._slots: asyncio.Semaphore | None = None

    @property
    def relay(self) -> str:
        """``host:port`` of the relay, for alerts and logs."""
        return self.endpoint.relay

    async def send(self, email: OutgoingEmail, on_stage: StageCallback) -> SendResult:
        """Send `email` on a pooled connection; report how far it got and what the server said."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.connections)
        async with self._slots:
            return await self._send_on_a_connection(email, on_stage)

    async def _send_on_a_connection(
        self, email: OutgoingEmail, on_stage: StageCallback
    ) -> SendResult:
        started = time.perf_counter()
        stage = CLAIMED
        client: aiosmtplib.SMTP | None = None
        try:
            body = email.as_bytes()
            client = self._take_idle()
            reused = client is not None
            if client is None:
                await on_stage(email, CONNECTING)
                stage = CONNECTING
                client = await self._connect()
            await on_stage(email, ENVELOPE)
            stage = ENVELOPE
            client, refusal = await self._within_stage(self._envelope(client, email, body, reused))
            if refusal is not None:  # our own check before MAIL: nothing was sent
                self._idle.append(client)
                refusal.duration_ms = _elapsed_ms(started)
                return refusal
            await on_stage(email, DATA_SENT)  # raises when the mark is refused: no body
            stage = DATA_SENT
            response = await self._within_stage(_send_body(client, body))
        except Exception as error:  # noqa: BLE001 - every failure becomes a result
            result = describe_failure(error, stage, _elapsed_ms(started))
            if client is not None:
                await self._reset_or_drop(client, error)
            return result
        except BaseException:  # cancelled: the connection is in an unknown state
            if client is not None:
                client.close()
            raise
        self._idle.append(client)
        return SendResult(
            stage=REPLY_READ,
            code=response.code,
            reply_text=response.message,
            provider_message_id=provider_id_from_reply(response.message),
            duration_ms=_elapsed_ms(started),
        )

    async def _within_stage(self, step: Awaitable[T]) -> T:
        """Await `step` within the stage's ``timeout_seconds``, a read timeout past it.

        The commands inside go without a timer of their own (aiosmtplib's per-command
        ``wait_for`` costs a future, a timer and a turn of the event loop for each reply).
        """
        deadline = asyncio.timeout(self.timeout_seconds)
        try:
            async with deadline:
                return await step
        except TimeoutError as error:
            if not deadline.expired():  # a timeout of a connection opened within the stage
                raise
            raise aiosmtplib.SMTPReadTimeoutError(
                "Timed out waiting for server response"
            ) from error

    def _take_idle(self) -> aiosmtplib.SMTP | None:
        while self._idle:
            client = self._idle.pop()
            if client.is_connected:
                return client
            client.close()
            self._lost += 1
        return None

    async def _reset_or_drop(self, client: aiosmtplib.SMTP, error: BaseException) -> None:
        """After a refusal: RSET and keep the connection; after a break: close it."""
        if client.is_connected and _leaves_connection_usable(error):
            try:
                await client.rset(timeout=self.timeout_seconds)
            except Exception:  # noqa: BLE001 - RSET refused or the line broke: replace it
                pass
            else:
                self._idle.append(client)
                return
        client.close()
        self._lost += 1

    async def _connect(self) -> aiosmtplib.SMTP:
        endpoint = self.endpoint
        client = aiosmtplib.SMTP(
            hostname=endpoint.host,
            port=endpoint.port,
            use_tls=endpoint.use_tls,
            start_tls=endpoint.start_tls,
            username=endpoint.username,
            password=endpoint.password,
            timeout=self.timeout_seconds,
            local_hostname=self.ehlo_name,
            tls_context=self._tls_context,
        )
        if self._lost:
            self._lost -= 1
            self.reconnects += 1
        await client.connect()
        try:
            if client.is_ehlo_or_helo_needed:
                await client.ehlo()
        except BaseException:
            client.close()
            raise
        for keyword in self.discard_ehlo_keywords:  # as if the relay had not offered it
            client.esmtp_extensions.pop(keyword, None)
        return client

    async def _envelope(
        self, client: aiosmtplib.SMTP, email: OutgoingEmail, body: bytes, reused: bool
    ) -> tuple[aiosmtplib.SMTP, SendResult | None]:
        """Send MAIL and RCPT; a pooled connection the server dropped is replaced once."""
        try:
            return client, await self._mail_and_rcpt(client, email, body)
        except aiosmtplib.SMTPServerDisconnected:
            if not reused:
                raise
        client.close()
        self._lost += 1
        fresh = await self._connect()
        try:
            return fresh, await self._mail_and_rcpt(fresh, email, body)
        except BaseException:
            fresh.close()
            self._lost += 1
            raise

    async def _mail_and_rcpt(
        self, client: aiosmtplib.SMTP, email: OutgoingEmail, body: bytes
    ) -> SendResult | None:
        """MAIL FROM with its parameters, then RCPT TO; a result when our own check refuses."""
        options, encoding = [], "ascii"
        if _needs_smtputf8(email.envelope_from, email.recipient):
            if not client.supports_extension("smtputf8"):
                error = f"the relay {self.relay} does not offer SMTPUTF8, needed for this address"
                return SendResult(stage=ENVELOPE, error=error, error_type=SMTPUTF8_NOT_OFFERED)
            options, encoding = ["SMTPUTF8"], "utf-8"
        limit = size_limit(client)
        if limit is not None and len(body) > limit:
            error = f"message of {len(body)} bytes over the relay's SIZE limit of {limit} bytes"
            return SendResult(stage=ENVELOPE, error=error, error_type=MESSAGE_TOO_BIG)
        if client.supports_extension("size"):
            options.append(f"SIZE={len(body)}")
        if not body.isascii() and client.supports_extension("8bitmime"):
            options.append("BODY=8BITMIME")
        sender = email.envelope_from
        parameters = [option.encode("ascii") for option in options]
        mail_from = b"FROM:" + smtp_path(sender, encoding)
        rcpt_to = b"TO:" + smtp_path(email.recipient, encoding)
        if pipelining.offers_pipelining(client):  # one write, both replies
            mail = b" ".join([b"MAIL", mail_from, *parameters])
            reply, rcpt_reply = await pipelining.mail_and_rcpt(client, mail, b"RCPT " + rcpt_to)
        else:
            reply = await client.execute_command(b"MAIL", mail_from, *parameters, timeout=None)
            rcpt_reply = None
        if reply.code != aiosmtplib.SMTPStatus.completed:
            raise aiosmtplib.SMTPSenderRefused(reply.code, reply.message, sender)
        reply = rcpt_reply or await client.execute_command(b"RCPT", rcpt_to, timeout=None)
        if reply.code not in _RECIPIENT_ACCEPTED:
            raise aiosmtplib.SMTPRecipientRefused(reply.code, reply.message, email.recipient)
        return None

    async def close(self) -> None:
        """Say QUIT on every idle connection and close it."""
        idle, self._idle = self._idle, []
        for client in idle:
            with contextlib.suppress(Exception):  # a connection the relay dropped: close anyway
                await client.quit(timeout=min(self.timeout_seconds, _QUIT_SECONDS))
            client.close()


def envelope_address(mailbox: str) -> str:
    """Return the bare address of a From header value, for MAIL FROM."""
    return parseaddr(mailbox)[1] or mailbox


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
