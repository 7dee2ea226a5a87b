"""Benchmark: the worker's send rate and CPU against bare aiosmtplib clients, in one run.

For each database (SQLite, PostgreSQL) and connection count (1, 4), on the same
counting SMTP sink (aiosmtpd in another process):

1. the worker drains N enqueued order confirmations (claim, render, serialize,
   mark, send, record): msg/s and this process's CPU ms a message;
2. the ceiling: a bare aiosmtplib loop sending N messages serialized beforehand;
3. the bare client: the same loop rendering and serializing each message first.

Then, per database, the time from starting ``console worker`` (a real process)
to its first accepted message with a backlog waiting. Last, the targets as ratio
lines measured in this run, each with a check mark or a cross.

    python -m tests.bench.bench_send --repeat 3        # N=2000, every combination
    python -m tests.bench.bench_send -n 5000 --backends sqlite --connections 1
    python -m tests.bench.bench_send --pipelining --chunking   # the sink offers both

With ``--pipelining`` the sink's EHLO offers PIPELINING, with ``--chunking`` CHUNKING
(BDAT), as Postfix's does: the worker then sends MAIL and RCPT in one write and the
body as one BDAT chunk; aiosmtplib's own ``sendmail`` (the ceiling and the bare
client) uses neither.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import dataclasses
import datetime as dt
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiosmtplib  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

import console  # noqa: E402
from console.core.backoff import Backoff  # noqa: E402
from console.core.lifecycle import RetryPolicy  # noqa: E402
from console.mail.catalog import default_catalog  # noqa: E402
from console.mail.serialize import serialize_message  # noqa: E402
from console.models import Intent  # noqa: E402
from console.outbox import enqueue, new_message_id  # noqa: E402
from console.store.database import make_engine, make_session_factory  # noqa: E402
from console.transports.smtp import SmtpTransport  # noqa: E402
from console.vocabulary import SUBMITTED  # noqa: E402
from console.worker.decisions import WorkerSettings, batch_size_for  # noqa: E402
from console.worker.guard import GuardPolicy  # noqa: E402
from console.worker.loop import Worker  # noqa: E402
from tests.conftest import migrate_to_head  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.commands import CONSOLE_BIN  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

MAIL_FROM = "Shop <shop@example.com>"
TEMPLATE = "order-confirmation"
FIRST_MESSAGE_TARGET_SECONDS = 1.0


@dataclasses.dataclass
class Run:
    """Messages a second and this process's CPU milliseconds a message."""

    rate: float
    cpu_ms: float


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


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(count: int, function) -> Run:
    """Run `function()` and measure it as `count` messages."""
    started, cpu_started = time.perf_counter(), cpu_seconds()
    function()
    elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
    return Run(count / elapsed, 1000 * cpu / count)


def worker_with_backlog(url: str, smtp_url: str, count: int, connections: int):
    """Enqueue `count` orders; return the engine, its session factory and a worker set up
    as `console worker` runs (``bench_worker``)."""
    engine, session_factory, worker = bench_worker(url, smtp_url, connections)
    enqueue_orders(session_factory, count)
    return engine, session_factory, worker


def bench_worker(url: str, smtp_url: str, connections: int):
    """The engine, its session factory and a worker set up as `console worker` runs (the
    breaker on) over `connections` SMTP connections."""
    engine = make_engine(url)
    session_factory = make_session_factory(engine)
    settings = WorkerSettings(
        mail_from=MAIL_FROM,
        retry=RetryPolicy(Backoff(30, 3600, 5), 8, 86400),
        batch_size=batch_size_for(None, connections),  # CONSOLE_BATCH_SIZE not set
        concurrency=connections,
    )
    transport = SmtpTransport(smtp_url, connections=connections, timeout_seconds=30)
    worker = Worker(session_factory, transport, settings, guard_policy=GuardPolicy())
    return engine, session_factory, worker


def drain_seconds(worker) -> float:
    """Tick `worker` until a claim comes back empty; the seconds it took."""
    started = time.perf_counter()
    while worker.run_once().claimed:
        pass
    return time.perf_counter() - started


def drain_with_worker(url: str, smtp_url: str, count: int, connections: int) -> Run:
    """Enqueue `count` intents, then time the worker until all are submitted."""
    engine, session_factory, worker = worker_with_backlog(url, smtp_url, count, connections)

    def drain() -> None:
        while worker.run_once().claimed:
            pass

    run = timed(count, drain)
    worker.close()
    with session_factory() as session:
        submitted = session.execute(
            select(func.count()).where(Intent.status == SUBMITTED)
        ).scalar_one()
    engine.dispose()
    if submitted != count:
        raise RuntimeError(f"only {submitted} of {count} intents were submitted")
    return run


def one_message(n: int, catalog) -> tuple[str, bytes]:
    """Render and serialize order `n` as the worker does, without the database."""
    recipient = f"customer{n}@example.com"
    parts = catalog.render(TEMPLATE, 1, order_params(n))
    body = serialize_message(
        mail_from=MAIL_FROM,
        recipient=recipient,
        message_id=new_message_id("bench.example"),
        parts=parts,
        date=dt.datetime.now(dt.UTC),
    )
    return recipient, body


async def _bare_send(port: int, messages, connections: int) -> None:
    """Send `messages` (pairs, or callables that make one) over `connections` clients."""

    async def one_connection(share) -> None:
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, local_hostname="bench")
        await client.connect()
        for message in share:
            recipient, body = message() if callable(message) else message
            await client.sendmail("shop@example.com", [recipient], body)
        await client.quit()

    await asyncio.gather(*(one_connection(messages[i::connections]) for i in range(connections)))


def ceiling(port: int, count: int, connections: int) -> Run:
    """Pre-serialized bytes, sent as fast as aiosmtplib can."""
    catalog = default_catalog()
    messages = [one_message(n, catalog) for n in range(count)]
    return timed(count, lambda: asyncio.run(_bare_send(port, messages, connections)))


def bare_client(port: int, count: int, connections: int) -> Run:
    """Render + serialize + send each message: the work of a client with no bookkeeping."""
    catalog = default_catalog()
    makers = [lambda n=n: one_message(n, catalog) for n in range(count)]
    return timed(count, lambda: asyncio.run(_bare_send(port, makers, connections)))


def database_url(backend: str, cluster, workdir: Path, number: int) -> str:
    if backend == "sqlite":
        url = f"sqlite:///{workdir / f'bench{number}.db'}"
    else:
        url = pgcluster.create_database(cluster, f"bench{number}")
    migrate_to_head(url)
    return url


def first_message_seconds(url: str, smtp_url: str, workdir: Path, backlog: int = 200) -> float:
    """Start `console worker` with `backlog` intents waiting: seconds to the first accepted.

    The package's byte code is written first, as ``pip install`` leaves it: an editable
    checkout run with PYTHONDONTWRITEBYTECODE would compile its edited modules at each start.
    """
    compileall.compile_dir(Path(console.__file__).parent, quiet=1)
    engine = make_engine(url)
    session_factory = make_session_factory(engine)
    enqueue_orders(session_factory, backlog)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    env.update(
        CONSOLE_DATABASE_URL=url,
        CONSOLE_SMTP_URL=smtp_url,
        CONSOLE_SECRET_KEY="bench-send" * 4,
        CONSOLE_LOG_LEVEL="WARNING",
    )
    started_at = dt.datetime.now(dt.UTC)
    process = subprocess.Popen(
        [CONSOLE_BIN, "worker"], env=env, cwd=workdir, stderr=subprocess.DEVNULL
    )
    try:
        first = None
        deadline = time.monotonic() + 60
        while first is None and time.monotonic() < deadline:
            with session_factory() as session:
                first = session.execute(select(func.min(Intent.submitted_at))).scalar_one()
            time.sleep(0.01)
    finally:
        process.terminate()
        process.wait(timeout=30)
        engine.dispose()
    if first is None:
        raise RuntimeError("console worker sent nothing within 60 s")
    return (first - started_at).total_seconds()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def check(label: str, value: float, target: float, *, at_most: bool = False) -> str:
    met = value <= target if at_most else value >= target
    return f"{'✓' if met else '✗'} {label}: {value:.2f} (target {'≤' if at_most else '≥'} {target})"


def ratio_lines(figures: dict, startup: dict) -> list[str]:
    """The targets of the send loop, as ratios measured in this run."""
    lines = []
    for backend in ("sqlite", "postgresql"):
        if (backend, 1) in figures:
            worker, top = figures[backend, 1]["worker"], figures[backend, 1]["ceiling"]
            lines.append(
                check(f"{backend}, 1 connection: worker / ceiling", worker.rate / top.rate, 0.5)
            )
    if ("postgresql", 4) in figures:
        worker, bare = figures["postgresql", 4]["worker"], figures["postgresql", 4]["bare"]
        lines.append(
            check("postgresql, 4 connections: worker / bare client", worker.rate / bare.rate, 0.5)
        )
    for (backend, connections), runs in figures.items():
        cpu = runs["worker"].cpu_ms / runs["bare"].cpu_ms
        label = f"{backend}, {connections} connection(s): worker CPU a message / bare client's"
        lines.append(check(label, cpu, 2.0, at_most=True))
    for backend, seconds in startup.items():
        label = f"{backend}: seconds from `console worker` starting to its first message"
        lines.append(check(label, seconds, FIRST_MESSAGE_TARGET_SECONDS, at_most=True))
    return lines


def median_run(runs: list[Run]) -> Run:
    return Run(statistics.median(r.rate for r in runs), statistics.median(r.cpu_ms for r in runs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=2000)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--connections", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure; the median wins")
    parser.add_argument("--pipelining", action="store_true", help="the sink offers PIPELINING")
    parser.add_argument("--chunking", action="store_true", help="the sink offers CHUNKING")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)

    workdir = Path(tempfile.mkdtemp(prefix="bench-send-"))
    cluster = pgcluster.start_cluster(durable=True) if "postgresql" in args.backends else None
    sink = SubprocessSMTPServer.start(pipelining=args.pipelining, chunking=args.chunking)
    offered = [name for name in ("PIPELINING", "CHUNKING") if getattr(args, name.lower())]
    offers = f" offering {' and '.join(offered)}" if offered else ""
    print(
        f"N={args.messages} template={TEMPLATE} sink=aiosmtpd{offers} in another process, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; median of {args.repeat}"
    )
    print(
        f"{'database':<11}{'conns':>6}{'worker msg/s':>14}{'CPU ms':>8}{'ceiling msg/s':>15}"
        f"{'CPU ms':>8}{'bare msg/s':>12}{'CPU ms':>8}{'worker/ceiling':>16}{'RSS MB':>8}"
    )
    figures: dict[tuple[str, int], dict[str, Run]] = {}
    startup: dict[str, float] = {}
    number = 0
    try:
        for backend in args.backends:
            for connections in args.connections:
                runs: dict[str, list[Run]] = {"worker": [], "ceiling": [], "bare": []}
                for _ in range(args.repeat):  # alternated, so drift hits each alike
                    number += 1
                    url = database_url(backend, cluster, workdir, number)
                    runs["worker"].append(
                        drain_with_worker(url, sink.url, args.messages, connections)
                    )
                    runs["ceiling"].append(ceiling(sink.port, args.messages, connections))
                    runs["bare"].append(bare_client(sink.port, args.messages, connections))
                medians = {name: median_run(r) for name, r in runs.items()}
                figures[backend, connections] = medians
                w, c, b = medians["worker"], medians["ceiling"], medians["bare"]
                print(
                    f"{backend:<11}{connections:>6}{w.rate:>14.0f}{w.cpu_ms:>8.2f}{c.rate:>15.0f}"
                    f"{c.cpu_ms:>8.2f}{b.rate:>12.0f}{b.cpu_ms:>8.2f}{w.rate / c.rate:>16.2f}"
                    f"{peak_rss_mb():>8.0f}",
                    flush=True,
                )
            seconds = []
            for _ in range(args.repeat):
                number += 1
                url = database_url(backend, cluster, workdir, number)
                seconds.append(first_message_seconds(url, sink.url, workdir))
            startup[backend] = statistics.median(seconds)
    finally:
        sink.stop()
        if cluster is not None:
            cluster.stop()
    for line in ratio_lines(figures, startup):
        print(line)


if __name__ == "__main__":
    main()
