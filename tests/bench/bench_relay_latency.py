"""Benchmark: the worker's rate to a relay across a network, with and without its extensions.

A proxy on 127.0.0.1 holds each direction of the SMTP connection for half the
round trip; behind it the scripted sink offers neither PIPELINING nor CHUNKING,
PIPELINING alone, or both. A message costs four round trips to the first, three to
the second and two to the third, and the rates follow.

    python -m tests.bench.bench_relay_latency                 # 10 ms, 1 and 4 connections
    python -m tests.bench.bench_relay_latency --rtt-ms 30 -n 200 --connections 1
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_send import database_url, drain_seconds, worker_with_backlog  # noqa: E402
from tests.support.delay_proxy import DelayProxy  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

OFFERS = {"neither": (False, False), "PIPELINING": (True, False), "both": (True, True)}


def rate(offers: str, rtt_ms: float, count: int, connections: int, workdir: Path) -> float:
    """Messages a second one worker (SQLite) sends through the proxy to a sink offering
    `offers`."""
    pipelining, chunking = OFFERS[offers]
    sink = SubprocessSMTPServer.start(pipelining=pipelining, chunking=chunking)
    proxy = DelayProxy(sink.port, rtt_ms / 2000)
    number = list(OFFERS).index(offers) * 100 + connections  # a database file of its own
    url = database_url("sqlite", None, workdir, number)
    engine, _, worker = worker_with_backlog(
        url, f"smtp://127.0.0.1:{proxy.port}", count, connections
    )
    try:
        return count / drain_seconds(worker)
    finally:
        worker.close()
        engine.dispose()
        proxy.stop()
        sink.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=10.0)
    parser.add_argument("-n", "--messages", type=int, default=300, help="per connection")
    parser.add_argument("--connections", nargs="+", type=int, default=[1, 4])
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    print(f"relay {args.rtt_ms:g} ms away (a delaying proxy); SQLite; msg/s")
    print(f"{'conns':>5}" + "".join(f"{name:>14}" for name in OFFERS))
    for connections in args.connections:
        count = args.messages * connections
        rates = [rate(name, args.rtt_ms, count, connections, workdir) for name in OFFERS]
        print(f"{connections:>5}" + "".join(f"{r:>14.1f}" for r in rates), flush=True)


if __name__ == "__main__":
    main()
