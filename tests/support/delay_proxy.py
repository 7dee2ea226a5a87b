"""A TCP proxy on 127.0.0.1 that delays each direction: a peer across a network.

In the process (``DelayProxy``, its loop in a thread) or in a process of its own
(``SubprocessDelayProxy``: its forwarding then takes no CPU from the process measured)::

    python -m tests.support.delay_proxy --target-port 5432 --one-way-ms 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.loop_server import LoopServer

ROOT = Path(__file__).resolve().parents[2]


class DelayProxy(LoopServer):
    """Forwards 127.0.0.1:port to `target_port`, each chunk `one_way_seconds` late."""

    def __init__(self, target_port: int, one_way_seconds: float) -> None:
        self._target_port = target_port
        self._delay = one_way_seconds
        super().__init__()

    async def _session(self, client_reader, client_writer) -> None:
        relay_reader, relay_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        await asyncio.gather(
            self._pump(client_reader, relay_writer), self._pump(relay_reader, client_writer)
        )

    async def _pump(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                self._loop.call_later(self._delay, writer.write, data)
        finally:
            self._loop.call_later(self._delay, writer.close)


class SubprocessDelayProxy:
    """A ``DelayProxy`` in a child process; ``port`` once started, ``stop`` to end it."""

    def __init__(self, target_port: int, one_way_seconds: float) -> None:
        command = [sys.executable, "-m", "tests.support.delay_proxy"]
        command += ["--target-port", str(target_port), "--one-way-ms", str(one_way_seconds * 1000)]
        self._process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.port = int(self._process.stdout.readline())

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(10)


def url_through(url: str, port: int) -> str:
    """The same PostgreSQL URL (host 127.0.0.1), by way of a proxy on `port`."""
    head, _, tail = url.rpartition("@127.0.0.1:")
    return f"{head}@127.0.0.1:{port}/{tail.split('/', 1)[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-port", type=int, required=True)
    parser.add_argument("--one-way-ms", type=float, required=True)
    args = parser.parse_args()
    proxy = DelayProxy(args.target_port, args.one_way_ms / 1000)
    print(proxy.port, flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    os._exit(0)  # the sessions in flight end with the process


if __name__ == "__main__":
    main()
