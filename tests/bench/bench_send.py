"""Benchmark: the worker's send rate against the bare SMTP ceiling, in the same run.

For each database (SQLite, PostgreSQL) and connection count (1, 4):

1. enqueue N order confirmations (not timed);
2. drain them with the worker (claim, render, serialize, send, record), timed;
3. send N messages serialized beforehand with a bare aiosmtplib loop over the
   same number of connections (no database, no rendering), timed: the ceiling.

Both talk to the same counting SMTP sink (aiosmtpd) running in another process.
Prints msgs/s of each, their ratio, and the peak RSS of this process.

    python tests/bench/bench_send.py            # N=2000, every combination
    python tests/bench/bench_send.py -n 5000 --backends sqlite --connections 1
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiosmtplib  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from console.core.backoff import Backoff  # noqa: E402
from console.core.lifecycle import RetryPolicy  # noqa: E402
from console.mail.catalog import default_catalog  # noqa: E402
from console.mail.render import build_message  # noqa: E402
from console.models import Intent
from console.outbox import enqueue, new_message_id  # noqa: E402
from console.store.database import make_engine, make_session_factory  # noqa: E402
from console.transports.smtp import SmtpTransport  # noqa: E402
from console.vocabulary import SUBMITTED
from console.worker.loop import Worker
from console.worker.settings import WorkerSettings  # noqa: E402
from tests.conftest import migrate_to_head  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

MAIL_FROM = "Shop <shop@example.com>"
TEMPLATE = "order-confirmation"


def order_params(n: int) -> dict:
    return {
        "customer_name": f"Customer {n}",
        "order_number": f"A-{100000 + n}",
        "items": [
            {"quantity": 2, "name": "Green tea, 100 g", "price": "7.80"},
            {"quantity": 1, "name": "Teapot", "price": "24.00"},
        ],
        "total": "31.80",
    }


def enqueue_orders(session_factory, count: int) -> None:
    with session_factory() as session:
        for n in range(count):
            enqueue(
                session,
                key=f"bench:{n}",
                to=f"customer{n}@example.com",
                template=TEMPLATE,
                params=order_params(n),
            )
        session.commit()


def drain_with_worker(url: str, smtp_url: str, count: int, connections: int) -> float:
    """Enqueue `count` intents, then time the worker until all are submitted."""
    engine = make_engine(url)
    session_factory = make_session_factory(engine)
    enqueue_orders(session_factory, count)
    settings = WorkerSettings(
        mail_from=MAIL_FROM,
        retry=RetryPolicy(Backoff(30, 3600, 5), 8, 86400),
        concurrency=connections,
    )
    transport = SmtpTransport(smtp_url, connections=connections, timeout_seconds=30)
    worker = Worker(session_factory, transport, settings)
    started = time.perf_counter()
    drained = False
    while not drained:
        drained = worker.run_once().claimed == 0
    elapsed = time.perf_counter() - started
    worker.close()
    with session_factory() as session:
        submitted = session.execute(
            select(func.count()).where(Intent.status == SUBMITTED)
        ).scalar_one()
    engine.dispose()
    if submitted != count:
        raise RuntimeError(f"only {submitted} of {count} intents were submitted")
    return count / elapsed


def serialized_messages(count: int) -> list[tuple[str, bytes]]:
    catalog = default_catalog()
    messages = []
    for n in range(count):
        intent = SimpleNamespace(
            template=TEMPLATE,
            template_version=1,
            params=order_params(n),
            recipient=f"customer{n}@example.com",
            message_id=new_message_id("bench.example"),
        )
        parts = catalog.render(TEMPLATE, 1, intent.params)
        message = build_message(intent, mail_from=MAIL_FROM, catalog=catalog, parts=parts)
        messages.append((intent.recipient, message.as_bytes()))
    return messages


async def _bare_send(port: int, messages: list[tuple[str, bytes]], connections: int) -> None:
    async def one_connection(share: list[tuple[str, bytes]]) -> None:
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, local_hostname="bench")
        await client.connect()
        for recipient, body in share:
            await client.sendmail("shop@example.com", [recipient], body)
        await client.quit()

    await asyncio.gather(*(one_connection(messages[i::connections]) for i in range(connections)))


def bare_ceiling(port: int, messages: list[tuple[str, bytes]], connections: int) -> float:
    started = time.perf_counter()
    asyncio.run(_bare_send(port, messages, connections))
    return len(messages) / (time.perf_counter() - started)


def database_url(backend: str, cluster, workdir: Path, number: int) -> str:
    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'bench{number}.db'}"
    else:
        url = pgcluster.create_database(cluster, f"bench{number}")
    migrate_to_head(url)
    return url


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=2000)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--connections", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure; the median wins")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)

    workdir = Path(tempfile.mkdtemp(prefix="bench-send-"))
    cluster = pgcluster.start_cluster() if "postgresql" in args.backends else None
    sink = SubprocessSMTPServer.start()
    print(f"N={args.messages} template={TEMPLATE} sink=aiosmtpd in another process")
    print(
        f"{'database':<11}{'conns':>6}{'worker msg/s':>14}{'ceiling msg/s':>15}{'ratio':>7}"
        f"{'peak RSS MB':>13}"
    )
    number = 0
    try:
        for backend in args.backends:
            for connections in args.connections:
                worker_rates, ceiling_rates = [], []
                for _ in range(args.repeat):
                    number += 1
                    url = database_url(backend, cluster, workdir, number)
                    worker_rates.append(
                        drain_with_worker(url, sink.url, args.messages, connections)
                    )
                    messages = serialized_messages(args.messages)
                    ceiling_rates.append(bare_ceiling(sink.port, messages, connections))
                worker_rate = statistics.median(worker_rates)
                ceiling_rate = statistics.median(ceiling_rates)
                print(
                    f"{backend:<11}{connections:>6}{worker_rate:>14.0f}{ceiling_rate:>15.0f}"
                    f"{worker_rate / ceiling_rate:>7.2f}{peak_rss_mb():>13.0f}",
                    flush=True,
                )
    finally:
        sink.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
