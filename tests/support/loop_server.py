"""A TCP server on 127.0.0.1 whose event loop runs in a thread of its own, for tests and
benchmarks that need a peer with timing of their own making (relays, proxies)."""

from __future__ import annotations

import asyncio
import threading


class LoopServer:
    """Listens on ``port`` from construction until ``stop``; ``_session`` serves each
    connection (a coroutine of a subclass, given the stream reader and writer)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._session, "127.0.0.1", 0)
        )
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
