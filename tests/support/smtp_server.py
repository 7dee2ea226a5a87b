"""A scriptable SMTP server (aiosmtpd) on 127.0.0.1, in-process or as a subprocess.

Each recipient can be told how to answer its 1st, 2nd, ... attempt (the last
behaviour repeats); recipients without a script use ``"*"`` (default: accept).
A behaviour is one string:

- ``"250"``: accept the body, answering ``250 2.0.0 Ok: queued as <id>`` (an id
  shaped like a relay's queue id, with a random prefix per server start, so ids
  never repeat across restarts);
- ``"421"``, ``"450"``, ``"451"``, ``"452"``, ``"550"``, ``"553"``, ``"554"`` (or
  any ``"NNN optional text"``): answer that code after the body;
- ``"latin1:250 2.0.0 Ok für dich"`` (any code and text): that reply after the body, its
  text in Latin-1 bytes rather than UTF-8, as an old relay may answer;
- ``"rcpt:550"`` (any code): refuse the recipient at RCPT TO;
- ``"rcpt:stall"``: never answer RCPT TO (the client times out before DATA);
- ``"stall"``: take the body, then answer nothing for ``stall_seconds``;
- ``"hangup"``: take the body, then drop the connection without a reply.

With ``pipelining=True`` the EHLO reply offers PIPELINING (aiosmtpd reads pipelined
commands in order anyway); with ``chunking=True`` it offers CHUNKING and takes
bodies by BDAT (``ChunkingSMTP``), scripted like those after DATA.

A key ``"#N"`` instead of a recipient scripts the Nth body to arrive, whoever it is
for (its first behaviour; body behaviours only): ``{"#60": ["454 4.7.0 Throttling
failure: Maximum sending rate exceeded"]}`` throttles the 60th message.

Every body that arrives is recorded with its Message-ID, recipient and what the
server did with it (``result``: the code it answered, ``"stall"`` or
``"hangup"``), in memory and, with `record_path`, as JSON lines in a file, so a
test can check "each Message-ID received at most once".

In-process::

    with ScriptedSMTPServer(script={"bob@example.com": ["451", "250"]}) as server:
        ...  # CONSOLE_SMTP_URL=server.url
        server.delivered_message_ids()

As a subprocess (for the demo, scale-out tests or a benchmark sink)::

    server = SubprocessSMTPServer.start(record_path=path, script={"*": ["250"]})
    ...
    server.stop(); read_records(path)

or from a shell: ``python tests/support/smtp_server.py --port 2525 --record /tmp/smtp.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping

from aiosmtpd.smtp import MISSING, SMTP

try:
    from tests.support.smtp_script import (
        DELIVERED_RESULTS,
        Received,
        Script,
        ScriptedHandler,
        _Authenticator,
        delivered_counts,
        read_records,
    )
except ImportError:  # run as a script: python tests/support/smtp_server.py
    from smtp_script import (  # type: ignore[no-redef]
        DELIVERED_RESULTS,
        Received,
        Script,
        ScriptedHandler,
        _Authenticator,
        delivered_counts,
        read_records,
    )

__all__ = ["Received", "ScriptedSMTPServer", "SubprocessSMTPServer", "read_records"]


logging.getLogger("mail.log").setLevel(logging.WARNING)


class ChunkingSMTP(SMTP):
    """aiosmtpd's server with BDAT (RFC 3030): the chunks of a message, the last one
    answered as the body after DATA is; EHLO offers CHUNKING when the handler says so."""

    async def smtp_BDAT(self, arg: str) -> None:  # noqa: N802 - aiosmtpd's naming
        words = arg.split()
        if len(words) not in (1, 2) or not words[0].isdigit() or words[1:] not in ([], ["LAST"]):
            await self.push("501 Syntax: BDAT <size> [LAST]")
            return
        chunk = await self._reader.readexactly(int(words[0]))
        if self.envelope is None or not self.envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        chunks = self.envelope.__dict__.setdefault("chunks", [])
        chunks.append(chunk)
        if len(words) == 1:
            await self.push("250 2.0.0 Chunk accepted")
            return
        self.envelope.content = self.envelope.original_content = b"".join(chunks)
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
        await self.push("250 OK" if status is MISSING else status)


class ScriptedSMTPServer:
    """The scripted server running on its own event loop in a background thread."""

    def __init__(
        self,
        *,
        script: Mapping[str, Iterable[str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
        stall_seconds: float = 10.0,
        auth: tuple[str, str] | None = None,
        tls_context: ssl.SSLContext | None = None,
        starttls_context: ssl.SSLContext | None = None,
        smtputf8: bool = True,
        size_limit: int | None = None,
        pipelining: bool = False,
        chunking: bool = False,
    ) -> None:
        self.host, self.port = host, port
        self._smtputf8 = smtputf8
        self._size_limit = size_limit
        self.script = Script(script)
        self.handler = ScriptedHandler(self.script, record_path, stall_seconds)
        self.handler.offer_pipelining = pipelining  # EHLO says PIPELINING (RFC 2920)
        self.handler.offer_chunking = chunking  # EHLO says CHUNKING (RFC 3030)
        self._auth = auth
        self._tls_context = tls_context
        self._starttls_context = starttls_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.connections_opened = 0  # how many SMTP sessions clients started
        self._sessions: list[SMTP] = []

    @property
    def url(self) -> str:
        """A CONSOLE_SMTP_URL for this server (credentials included when AUTH is on)."""
        scheme = "smtps" if self._tls_context else "smtp"
        user = f"{self._auth[0]}:{self._auth[1]}@" if self._auth else ""
        query = "?starttls=1" if self._starttls_context else ""
        return f"{scheme}://{user}{self.host}:{self.port}{query}"

    @property
    def received(self) -> list[Received]:
        with self.handler._lock:
            return list(self.handler.received)

    def delivered_message_ids(self) -> collections.Counter[str]:
        """Count, per Message-ID, the bodies the server has and may have delivered."""
        return collections.Counter(
            r.message_id for r in self.received if r.result in DELIVERED_RESULTS
        )

    def _protocol(self) -> SMTP:
        self.connections_opened += 1
        options = dict(hostname="smtp.test", enable_SMTPUTF8=self._smtputf8)
        if self._size_limit is not None:
            options.update(data_size_limit=self._size_limit)
        if self._auth:
            options.update(authenticator=_Authenticator(*self._auth), auth_require_tls=False)
        if self._starttls_context:
            options.update(tls_context=self._starttls_context)
        session = ChunkingSMTP(self.handler, **options)
        self._sessions.append(session)
        return session

    def start(self) -> ScriptedSMTPServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                server = loop.run_until_complete(
                    loop.create_server(self._protocol, self.host, self.port, ssl=self._tls_context)
                )
                self.port = server.sockets[0].getsockname()[1]
            except BaseException as error:  # noqa: BLE001 - reported to start()
                failure.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            server.close()
            for session in self._sessions:  # drop the connections clients left open
                if session.transport is not None:
                    session.transport.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="scripted-smtp", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self.handler.close()

    def __enter__(self) -> ScriptedSMTPServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclasses.dataclass
class SubprocessSMTPServer:
    """The scripted server in a child process (``python tests/support/smtp_server.py``)."""

    process: subprocess.Popen
    port: int
    record_path: str | None

    @classmethod
    def start(
        cls,
        *,
        record_path: str | os.PathLike[str] | None = None,
        script: Mapping[str, Iterable[str]] | None = None,
        stall_seconds: float = 10.0,
        port: int = 0,
        pipelining: bool = False,
        chunking: bool = False,
    ) -> SubprocessSMTPServer:
        command = [
            sys.executable,
            __file__,
            "--port",
            str(port),
            "--stall-seconds",
            str(stall_seconds),
            "--script",
            json.dumps(dict(script or {})),
        ]
        if record_path is not None:
            command += ["--record", str(record_path)]
        if pipelining:
            command.append("--pipelining")
        if chunking:
            command.append("--chunking")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = process.stdout.readline()
        if not line.startswith("SMTP_READY port="):
            process.kill()
            raise RuntimeError(f"the SMTP server did not start: {line!r}")
        return cls(process, int(line.split("=", 1)[1]), str(record_path) if record_path else None)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def delivered_counts(self) -> collections.Counter[str]:
        return delivered_counts(self.record_path) if self.record_path else collections.Counter()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted SMTP server on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", help="append received bodies as JSON lines to this file")
    parser.add_argument("--script", default="{}", help='JSON, e.g. {"*": ["250"]}')
    parser.add_argument("--stall-seconds", type=float, default=10.0)
    parser.add_argument("--pipelining", action="store_true", help="offer PIPELINING in EHLO")
    parser.add_argument("--chunking", action="store_true", help="offer CHUNKING (BDAT) in EHLO")
    args = parser.parse_args(argv)
    server = ScriptedSMTPServer(
        script=json.loads(args.script),
        port=args.port,
        record_path=args.record,
        stall_seconds=args.stall_seconds,
        pipelining=args.pipelining,
        chunking=args.chunking,
    ).start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    print(f"SMTP_READY port={server.port}", flush=True)
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main()
