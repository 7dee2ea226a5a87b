"""Benchmark: the worker with its PostgreSQL across a network.

A proxy in a process of its own holds each direction of the worker's database
connections for half the round trip (0: no proxy; the round trip a `SELECT 1` then
takes is printed too: the proxy's timers add to the nominal one). For each round trip the same
backlog is drained `--repeat` times; the median and the runs are printed. The sink
next door offers PIPELINING and CHUNKING.

    python -m tests.bench.bench_database_latency                       # 0 and 1 ms
    python -m tests.bench.bench_database_latency --rtt-ms 2 -n 2000 --connections 1
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from console.store.database import make_engine  # noqa: E402
from tests.bench.bench_send import bench_worker, database_url, drain_seconds, enqueue_orders  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.delay_proxy import SubprocessDelayProxy, url_through  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

_numbers = itertools.count(1)


def round_trip_ms(url: str, queries: int = 200) -> float:
    """A `SELECT 1`'s round trip to `url`, in milliseconds (the proxy's real delay)."""
    engine = make_engine(url)
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        started = time.perf_counter()
        for _ in range(queries):
            connection.execute(text("SELECT 1"))
        elapsed = time.perf_counter() - started
    engine.dispose()
    return 1000 * elapsed / queries


def drain_rate(cluster, sink, proxy, count: int, connections: int) -> float:
    """Messages a second one worker sends from a fresh backlog of `count` intents."""
    url = database_url("postgresql", cluster, Path(tempfile.gettempdir()), next(_numbers))
    engine, session_factory, worker = bench_worker(
        url_through(url, proxy.port) if proxy else url, sink.url, connections
    )
    enqueue_orders(session_factory, count)
    try:
        return count / drain_seconds(worker)
    finally:
        worker.close()
        engine.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", nargs="+", type=float, default=[0.0, 1.0])
    parser.add_argument("-n", "--messages", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    cluster = pgcluster.start_cluster(durable=True)
    sink = SubprocessSMTPServer.start(pipelining=True, chunking=True)
    print(f"PostgreSQL behind a delaying proxy; {args.connections} connections; msg/s")
    print(f"{'rtt ms':>7}{'measured':>9}{'median':>9}   (runs)")
    try:
        for rtt_ms in args.rtt_ms:
            proxy = SubprocessDelayProxy(cluster.port, rtt_ms / 2000) if rtt_ms else None
            url = pgcluster.create_database(cluster, f"rtt{next(_numbers)}")
            measured = round_trip_ms(url_through(url, proxy.port) if proxy else url)
            runs = [
                drain_rate(cluster, sink, proxy, args.messages, args.connections)
                for _ in range(args.repeat)
            ]
            if proxy:
                proxy.stop()
            each = ", ".join(f"{rate:.0f}" for rate in runs)
            figures = f"{rtt_ms:>7g}{measured:>9.2f}{statistics.median(runs):>9.0f}"
            print(f"{figures}   ({each})", flush=True)
    finally:
        sink.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
