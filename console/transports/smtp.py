"""SMTP transport on aiosmtplib: reused connections, a timeout per stage, one result per email.

The low-level calls (EHLO, MAIL, RCPT, DATA) let the worker record ``DATA_SENT``
before the body leaves the process. Any error closes the connection; the next
email opens a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import socket
import ssl
import time
from email.utils import parseaddr
from urllib.parse import parse_qs, unquote, urlsplit

import aiosmtplib

from console.core.send_result import SendResult
from console.transports.base import OutgoingEmail, StageCallback
from console.vocabulary import CLAIMED, CONNECTING, DATA_SENT, ENVELOPE, REPLY_READ

_QUEUE_ID = re.compile(r"(?:queued as|id=|^(?:\d\.\d\.\d+\s+)?ok)\s*([A-Za-z0-9._@<>-]{4,})", re.I)
_TRUE = ("1", "true", "yes", "on")


@dataclasses.dataclass(frozen=True)
class SmtpEndpoint:
    """Where and how to connect, parsed from ``CONSOLE_SMTP_URL``."""

    host: str
    port: int
    use_tls: bool = False  # smtps://: TLS from the first byte
    start_tls: bool = False  # ?starttls=1: upgrade after the greeting
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_url(cls, url: str) -> SmtpEndpoint:
        """Parse ``smtp://user:pass@host:port``, ``smtps://...`` or ``...?starttls=1``."""
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("an SMTP URL looks like smtp://user:pass@host:port")
        use_tls = parts.scheme == "smtps"
        query = parse_qs(parts.query)
        start_tls = query.get("starttls", ["0"])[-1].lower() in _TRUE
        if use_tls and start_tls:
            raise ValueError("smtps:// already uses TLS; drop ?starttls=1")
        return cls(
            host=parts.hostname,
            port=parts.port or (465 if use_tls else 25),
            use_tls=use_tls,
            start_tls=start_tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

    def __repr__(self) -> str:  # never show the password
        return (
            f"SmtpEndpoint({self.host}:{self.port}, tls={self.use_tls}, starttls={self.start_tls})"
        )


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


class SmtpTransport:
    """Send emails over up to `connections` reused SMTP connections."""

    def __init__(
        self,
        endpoint: SmtpEndpoint | str,
        *,
        connections: int = 1,
        timeout_seconds: float = 30.0,
        tls_context: ssl.SSLContext | None = None,
        local_hostname: str | None = None,
    ) -> None:
        self.endpoint = SmtpEndpoint.from_url(endpoint) if isinstance(endpoint, str) else endpoint
        self.connections = connections
        self.timeout_seconds = timeout_seconds
        self._tls_context = tls_context
        self._local_hostname = local_hostname or socket.gethostname()
        self._idle: list[aiosmtplib.SMTP] = []
        self._slots: asyncio.Semaphore | None = None

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
            reused = bool(self._idle)
            if reused:
                client = self._idle.pop()
            else:
                await on_stage(email, CONNECTING)
                stage = CONNECTING
                client = await self._connect()
            await on_stage(email, ENVELOPE)
            stage = ENVELOPE
            client = await self._envelope(client, email, reused)
            await on_stage(email, DATA_SENT)
            stage = DATA_SENT
            response = await client.data(body, timeout=self.timeout_seconds)
        except Exception as error:  # noqa: BLE001 - every failure becomes a result
            if client is not None:
                client.close()
            return describe_failure(error, stage, _elapsed_ms(started))
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
            local_hostname=self._local_hostname,
            tls_context=self._tls_context,
        )
        await client.connect()
        try:
            if client.is_ehlo_or_helo_needed:
                await client.ehlo()
        except BaseException:
            client.close()
            raise
        return client

    async def _envelope(
        self, client: aiosmtplib.SMTP, email: OutgoingEmail, reused: bool
    ) -> aiosmtplib.SMTP:
        """Send MAIL and RCPT; a pooled connection the server dropped is replaced once."""
        try:
            await self._mail_and_rcpt(client, email)
            return client
        except aiosmtplib.SMTPServerDisconnected:
            if not reused:
                raise
        client.close()
        fresh = await self._connect()
        try:
            await self._mail_and_rcpt(fresh, email)
        except BaseException:
            fresh.close()
            raise
        return fresh

    async def _mail_and_rcpt(self, client: aiosmtplib.SMTP, email: OutgoingEmail) -> None:
        options, encoding = [], "ascii"
        if _needs_smtputf8(email.envelope_from, email.recipient):
            if not client.supports_extension("smtputf8"):
                raise aiosmtplib.SMTPNotSupported("the relay does not offer SMTPUTF8")
            options, encoding = ["SMTPUTF8"], "utf-8"
        await client.mail(
            email.envelope_from, options=options, encoding=encoding, timeout=self.timeout_seconds
        )
        await client.rcpt(email.recipient, encoding=encoding, timeout=self.timeout_seconds)

    async def close(self) -> None:
        """Say QUIT on every idle connection and close it."""
        idle, self._idle = self._idle, []
        for client in idle:
            with contextlib.suppress(Exception):  # a connection the relay dropped: close anyway
                await client.quit(timeout=min(self.timeout_seconds, 2.0))
            client.close()


def envelope_address(mailbox: str) -> str:
    """Return the bare address of a From header value, for MAIL FROM."""
    return parseaddr(mailbox)[1] or mailbox


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
