"""Scale-out on PostgreSQL: throughput, critical latency, enqueue overhead, RSS, /metrics cost.

Everything runs against one throwaway PostgreSQL cluster and four subprocess SMTP
sinks that accept every message (worker or client process N sends to sink N mod 4,
so that one sink's process is not the limit), with real ``console worker`` processes:

1. the bare-client ceiling: render + serialize + aiosmtplib ``sendmail`` in 1
   and in 4 plain processes, no database (what the hardware can send at all);
2. throughput of 1, 2 and 4 ``console worker`` processes draining a backlog;
3. critical-lane latency (enqueue -> accepted, p50/p99) of login codes enqueued
   through ``enqueue()`` while 2 workers drain a 20,000-intent bulk backlog;
4. enqueue overhead: a business transaction (INSERT an order + ``enqueue()``)
   against the same transaction with a bare INSERT of the same intent row;
5. worker RSS after 50,000 messages (against its RSS once warmed up);
6. the /metrics queue snapshot on a million intents (full count, and a refresh).

    python -m tests.bench.bench_scale                      # everything (~15 min on 2 cores)
    python -m tests.bench.bench_scale --only throughput --messages 3000
    python -m tests.bench.bench_scale --only throughput --pipelining --chunking  # like Postfix

Targets: 4 processes >= 3x one; worker CPU a message <= 2x the bare client's (or
<= 0.6 ms); critical p99 <= 1 s with the bulk backlog never empty (it is sized from
the measured drain rate of 2 workers unless --backlog says); enqueue <= 2x a bare
INSERT; RSS growth <= 30 MB. Figures are printed, never asserted; the last lines
give each target with a check mark or a cross, as measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from console.models import Intent, utcnow
from console.outbox import enqueue
from console.store.database import make_engine
from console.vocabulary import SUBMITTED
from tests.conftest import migrate_to_head
from tests.support import pgcluster
from tests.support.backlog import bulk_insert_intents, recipient
from tests.support.console_processes import console_environment, worker_process
from tests.support.smtp_server import SubprocessSMTPServer

# CONSOLE_BATCH_SIZE not set: the default claim, 50 a connection
WORKER_SETTINGS = dict(CONSOLE_POLL_SECONDS="0.2", CONSOLE_SMTP_CONNECTIONS="4")
LOGIN_CODE_SPACING_SECONDS = 0.2
SINKS = 4  # SMTP sinks, each in a process of its own: worker N sends to sink N mod 4
TARGETS = {
    "scaling": "4 processes >= 3x one",
    "critical_p99": "<= 1 s",
    "enqueue": "<= 2x a bare INSERT",
    "rss": "growth <= 30 MB",
}


class Bench:
    """The cluster, the sink and a counter for fresh databases."""

    def __init__(self, workdir: Path, pipelining: bool = False, chunking: bool = False) -> None:
        self.workdir = workdir
        self.cluster = pgcluster.start_cluster(durable=True, max_connections=300)
        template_url = pgcluster.create_database(self.cluster, "bench_template")
        migrate_to_head(template_url)
        # one sink a worker process: a single aiosmtpd process is busy at about 2,000 msg/s
        offers = dict(pipelining=pipelining, chunking=chunking)  # what each sink's EHLO offers
        self.sinks = [SubprocessSMTPServer.start(**offers) for _ in range(SINKS)]
        self.sink = self.sinks[0]
        self._databases = 0

    def fresh_database(self) -> str:
        self._databases += 1
        name = f"bench_{self._databases}"
        return pgcluster.create_database(self.cluster, name, template="bench_template")

    def environment(self, url: str, number: int = 0, **extra: str) -> dict[str, str]:
        """`console worker` settings on `url`, the worker numbered `number` on its own sink."""
        sink = self.sinks[number % len(self.sinks)]
        return console_environment(url, sink.url, **WORKER_SETTINGS, **extra)

    def close(self) -> None:
        for sink in self.sinks:
            sink.stop()
        self.cluster.stop()


def submitted_count(engine: Engine) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(Intent.status == SUBMITTED)
        return session.execute(query).scalar_one()


def cpu_jiffies() -> tuple[int, int]:
    """Return (busy, total) CPU time of the whole machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_pids(data_dir: str) -> list[int]:
    """The postmaster of the benchmark's cluster and its children (other clusters excluded)."""
    postmaster = int(Path(data_dir, "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == postmaster:
                pids.append(int(entry.name))
    return pids


@dataclasses.dataclass
class Drain:
    """How fast a backlog drained, and who spent the CPU meanwhile."""

    rate: float  # messages a second
    cpu_busy: float  # share of the whole machine's CPU
    cpu_ms_per_message: dict[str, float]  # "workers", "postgresql", "smtp sinks"


def _cpu_by_role(worker_pids: list[int], sink_pids: list[int], data_dir: str) -> dict[str, float]:
    return {
        "workers": sum(process_cpu_seconds(pid) for pid in worker_pids),
        "postgresql": sum(process_cpu_seconds(pid) for pid in cluster_pids(data_dir)),
        "smtp sinks": sum(process_cpu_seconds(pid) for pid in sink_pids),
    }


def drain_rate(
    engine: Engine,
    total: int,
    timeout_seconds: float,
    worker_pids: list[int],
    sink_pids: list[int],
    data_dir: str,
) -> Drain:
    """Measure between 10 % and 90 % of `total` submitted (no start-up, no tail)."""
    marks: dict[float, tuple[float, tuple[int, int], dict[str, float]]] = {}
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        done = submitted_count(engine)
        for fraction in (0.1, 0.9):
            if done >= fraction * total and fraction not in marks:
                cpu = _cpu_by_role(worker_pids, sink_pids, data_dir)
                marks[fraction] = (time.monotonic(), cpu_jiffies(), cpu)
        if 0.9 in marks:
            (start, (busy0, total0), cpu0), (end, (busy1, total1), cpu1) = marks[0.1], marks[0.9]
            messages = 0.8 * total
            return Drain(
                rate=messages / (end - start),
                cpu_busy=(busy1 - busy0) / max(total1 - total0, 1),
                cpu_ms_per_message={
                    role: (cpu1[role] - cpu0[role]) * 1000 / messages for role in cpu0
                },
            )
        time.sleep(0.1)
    raise TimeoutError(f"{submitted_count(engine)} of {total} submitted in {timeout_seconds} s")


# --- 1. the bare client --------------------------------------------------------------------


def _bare_client(port: int, count: int, connections: int, results) -> None:
    from aiosmtplib import SMTP

    from console.mail.catalog import default_catalog
    from console.mail.serialize import serialize_message

    catalog = default_catalog()
    params = {"name": "Ada", "login_url": "https://shop.example.com/login"}

    async def one_connection(numbers: range) -> None:
        client = SMTP(hostname="127.0.0.1", port=port)
        await client.connect()
        for number in numbers:
            parts = catalog.render("welcome", 1, params)
            body = serialize_message(
                mail_from="Shop <shop@example.com>",
                recipient=recipient(number),
                message_id=f"<bare-{number}@outbox.test>",
                parts=parts,
                date=utcnow(),
            )
            await client.sendmail("shop@example.com", [recipient(number)], body)
        await client.quit()

    async def run() -> None:
        share = count // connections
        await asyncio.gather(
            *(one_connection(range(i * share, (i + 1) * share)) for i in range(connections))
        )

    started, cpu_started = time.monotonic(), time.process_time()
    asyncio.run(run())
    results.put((time.monotonic() - started, time.process_time() - cpu_started))


def bare_client_rate(bench: Bench, processes: int, count_each: int) -> tuple[float, float]:
    """Messages a second, and client CPU milliseconds a message."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    children = [
        context.Process(
            target=_bare_client, args=(bench.sinks[n % SINKS].port, count_each, 4, results)
        )
        for n in range(processes)
    ]
    for child in children:
        child.start()
    measured = [results.get(timeout=600) for _ in children]
    for child in children:
        child.join()
    messages = processes * count_each
    seconds = max(elapsed for elapsed, _ in measured)
    return messages / seconds, sum(cpu for _, cpu in measured) * 1000 / messages


# --- 2. worker throughput ------------------------------------------------------------------


def worker_rate(bench: Bench, processes: int, messages: int) -> Drain:
    url = bench.fresh_database()
    engine = make_engine(url)
    bulk_insert_intents(engine, 1, messages)
    workers = [worker_process(bench.environment(url, n), bench.workdir) for n in range(processes)]
    try:
        for worker in workers:
            worker.start()
        pids = [worker.pid for worker in workers]
        sink_pids = [sink.process.pid for sink in bench.sinks]
        return drain_rate(engine, messages, 900, pids, sink_pids, bench.cluster.data_dir)
    finally:
        for worker in workers:
            worker.stop()
        engine.dispose()


# --- 3. critical latency under a bulk backlog ----------------------------------------------


def critical_latency(bench: Bench, backlog: int, samples: int) -> tuple[float, float, int]:
    url = bench.fresh_database()
    engine = make_engine(url)
    bulk_insert_intents(engine, 1, backlog)
    workers = [worker_process(bench.environment(url), bench.workdir) for _ in range(2)]
    stop = threading.Event()

    def enqueue_login_codes() -> None:
        for number in range(samples):
            with Session(engine) as session:
                enqueue(
                    session,
                    key=f"login:{number}",
                    to=recipient(number),
                    template="login-code",
                    params={"code": f"{number:06d}"},
                )
                session.commit()
            if stop.wait(LOGIN_CODE_SPACING_SECONDS):
                return

    try:
        for worker in workers:
            worker.start()
        while submitted_count(engine) < backlog * 0.05:  # the drain is under way
            time.sleep(0.1)
        producer = threading.Thread(target=enqueue_login_codes)
        producer.start()
        producer.join()
        backlog_left = _bulk_waiting(engine)
        while _pending_login_codes(engine):
            time.sleep(0.2)
    finally:
        stop.set()
        for worker in workers:
            worker.stop()
    latencies = _login_code_latencies(engine)
    engine.dispose()
    return (
        statistics.median(latencies),
        statistics.quantiles(latencies, n=100)[98],
        backlog_left,
    )


def _bulk_waiting(engine: Engine) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(Intent.lane == "bulk", Intent.status != SUBMITTED)
        return session.execute(query).scalar_one()


def _pending_login_codes(engine: Engine) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(
            Intent.template == "login-code", Intent.status != SUBMITTED
        )
        return session.execute(query).scalar_one()


def _login_code_latencies(engine: Engine) -> list[float]:
    with Session(engine) as session:
        rows = session.execute(
            select(Intent.created_at, Intent.submitted_at).where(Intent.template == "login-code")
        ).all()
    return [(submitted - created).total_seconds() for created, submitted in rows]


# --- 4. enqueue overhead -------------------------------------------------------------------

BARE_INSERT = text(
    """
    INSERT INTO email_intent (idempotency_key, message_id, event, recipient, template,
        template_version, params, status, lane, attempt_count, next_attempt_at, created_at,
        updated_at)
    VALUES (:key, :message_id, :event, :recipient, 'login-code', 1, :params, 'pending',
        'critical', 0, :now, :now, :now)"""
)
ORDER_INSERT = text("INSERT INTO bench_order (customer, total) VALUES (:customer, 42.5)")


def enqueue_overhead(bench: Bench, transactions: int) -> tuple[float, float, float]:
    """Median milliseconds of a business transaction: order only, + bare INSERT, + enqueue."""
    url = bench.fresh_database()
    engine = make_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text("CREATE TABLE bench_order (id serial PRIMARY KEY, customer text, total numeric)")
        )

    def order_only(number: int, session: Session) -> None:
        session.execute(ORDER_INSERT, {"customer": f"c{number}"})

    def with_bare_insert(number: int, session: Session) -> None:
        session.execute(ORDER_INSERT, {"customer": f"c{number}"})
        session.execute(
            BARE_INSERT,
            {
                "key": f"bare:{number}",
                "message_id": f"<bare-{number}@outbox.test>",
                "event": f"order:{number}",
                "recipient": recipient(number),
                "params": '{"code": "123456"}',
                "now": utcnow(),
            },
        )

    def with_enqueue(number: int, session: Session) -> None:
        session.execute(ORDER_INSERT, {"customer": f"c{number}"})
        enqueue(
            session,
            key=f"enqueued:{number}",
            to=recipient(number),
            template="login-code",
            params={"code": "123456"},
            event=f"order:{number}",
        )

    timings: dict[str, list[float]] = {"order": [], "bare": [], "enqueue": []}
    bodies = {"order": order_only, "bare": with_bare_insert, "enqueue": with_enqueue}
    for number in range(transactions):  # interleaved, so drift hits all three alike
        for name, body in bodies.items():
            started = time.perf_counter()
            with Session(engine) as session:
                body(number, session)
                session.commit()
            timings[name].append((time.perf_counter() - started) * 1000)
    engine.dispose()
    return tuple(statistics.median(timings[name]) for name in ("order", "bare", "enqueue"))


# --- 5. worker RSS -------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def worker_rss(bench: Bench, messages: int, warm_after: int) -> tuple[int, int, int]:
    url = bench.fresh_database()
    engine = make_engine(url)
    bulk_insert_intents(engine, 1, messages)
    worker = worker_process(bench.environment(url), bench.workdir).start()
    try:
        while submitted_count(engine) < warm_after:
            time.sleep(0.2)
        warm = rss_kib(worker.pid)
        while submitted_count(engine) < messages:
            time.sleep(0.5)
        end = rss_kib(worker.pid)
    finally:
        worker.stop()
        engine.dispose()
    return warm, end, end - warm


# --- 6. /metrics on a million intents ------------------------------------------------------


def metrics_snapshot_ms(bench: Bench, rows: int, repeat: int) -> tuple[float, float]:
    """Median milliseconds of a full snapshot (every status counted) and of a refresh."""
    from console.ops.metrics.prometheus import read_snapshot
    from console.store.queue_figures import count_every_status
    from tests.bench.bench_console import fill_postgresql

    url = bench.fresh_database()
    engine = make_engine(url)
    fill_postgresql(engine, rows, utcnow())
    with Session(engine) as session:
        totals = count_every_status(session)
    timings: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeat):
        for full in (True, False):
            started = time.perf_counter()
            with Session(engine) as session, session.begin():
                read_snapshot(session, utcnow(), 60, None if full else totals)
            timings[full].append((time.perf_counter() - started) * 1000)
    engine.dispose()
    return statistics.median(timings[True]), statistics.median(timings[False])


# --- report --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=6000, help="backlog per throughput run")
    parser.add_argument(
        "--backlog", type=int, help="bulk backlog for latency (default: from the drain rate)"
    )
    parser.add_argument("--latency-samples", type=int, default=200)
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--rss-messages", type=int, default=50_000)
    parser.add_argument("--metrics-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--only",
        choices=["throughput", "latency", "enqueue", "rss", "metrics"],
        action="append",
        help="run only these parts (repeatable)",
    )
    parser.add_argument("--pipelining", action="store_true", help="the sinks offer PIPELINING")
    parser.add_argument("--chunking", action="store_true", help="the sinks offer CHUNKING")
    args = parser.parse_args()
    parts = set(args.only or ["throughput", "latency", "enqueue", "rss", "metrics"])
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    bench = Bench(workdir, pipelining=args.pipelining, chunking=args.chunking)
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"bench_scale {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load average before the run {load}; the sinks offer "
        f"{'PIPELINING' if args.pipelining else 'no PIPELINING'}, "
        f"{'CHUNKING' if args.chunking else 'no CHUNKING'}",
        flush=True,
    )
    try:
        run_parts(bench, args, parts)
    finally:
        bench.close()


def run_parts(bench: Bench, args: argparse.Namespace, parts: set[str]) -> None:
    checks: list[str] = []
    rates: dict[int, float] = {}
    if "throughput" in parts:
        checks += throughput_part(bench, args, rates)
    if "latency" in parts:
        checks += latency_part(bench, args, rates)
    if "enqueue" in parts:
        order, bare, enqueued = enqueue_overhead(bench, args.transactions)
        print(
            f"business transaction, median: order only {order:.2f} ms, + bare INSERT "
            f"{bare:.2f} ms, + enqueue() {enqueued:.2f} ms -> {enqueued / bare:.2f}x "
            f"(the intent alone: {(enqueued - order) / max(bare - order, 1e-9):.2f}x)  "
            f"target {TARGETS['enqueue']}",
            flush=True,
        )
        checks.append(check("enqueue() / a bare INSERT", enqueued / bare, "<=", 2.0))
    if "rss" in parts:
        warm, end, growth = worker_rss(bench, args.rss_messages, args.rss_messages // 10)
        print(
            f"worker RSS: {warm / 1024:.1f} MB after {args.rss_messages // 10} messages, "
            f"{end / 1024:.1f} MB after {args.rss_messages}: growth {growth / 1024:.1f} MB  "
            f"target {TARGETS['rss']}",
            flush=True,
        )
        checks.append(check("worker RSS growth, MB", growth / 1024, "<=", 30.0))
    if "metrics" in parts:
        full, refresh = metrics_snapshot_ms(bench, args.metrics_rows, repeat=5)
        print(
            f"/metrics queue snapshot on {args.metrics_rows} intents: {full:.0f} ms with the "
            f"count of every status (at most once a minute), {refresh:.1f} ms for a refresh"
        )
    for line in checks:
        print(line)


def check(label: str, value: float, relation: str, target: float) -> str:
    met = value <= target if relation == "<=" else value >= target
    shown = "≤" if relation == "<=" else "≥"
    return f"{'✓' if met else '✗'} {label}: {value:.2f} (target {shown} {target})"


def throughput_part(bench: Bench, args: argparse.Namespace, rates: dict[int, float]):
    bare_cpu_ms = {}
    for processes in (1, 4):
        rate, cpu_ms = bare_client_rate(bench, processes, args.messages // processes)
        bare_cpu_ms[processes] = cpu_ms
        print(
            f"bare client, {processes} process(es) x 4 connections: {rate:7.0f} msg/s; "
            f"client CPU ms a message: {cpu_ms:.2f}"
        )
    worker_cpu_ms = 0.0
    for processes in (1, 2, 4):
        drain = worker_rate(bench, processes, args.messages)
        rates[processes] = drain.rate
        worker_cpu_ms = worker_cpu_ms or drain.cpu_ms_per_message["workers"]
        cpu = ", ".join(f"{role} {ms:.2f}" for role, ms in drain.cpu_ms_per_message.items())
        print(
            f"console worker x {processes}: {drain.rate:7.0f} msg/s "
            f"({drain.rate / rates[1]:.2f}x one process); machine CPU {drain.cpu_busy:.0%} "
            f"busy; CPU ms a message: {cpu}",
            flush=True,
        )
    cpu_ratio = worker_cpu_ms / bare_cpu_ms[1]
    return [
        check("4 worker processes / one", rates[4] / rates[1], ">=", 3.0),
        check("worker CPU a message / the bare client's (1 process)", cpu_ratio, "<=", 2.0),
        check("worker CPU ms a message (16-core target)", worker_cpu_ms, "<=", 0.6),
    ]


def latency_part(bench: Bench, args: argparse.Namespace, rates: dict[int, float]):
    samples = args.latency_samples
    backlog = args.backlog or latency_backlog(bench, args, rates, samples)
    p50, p99, left = critical_latency(bench, backlog, samples)
    print(
        f"critical enqueue -> accepted during a {backlog} bulk drain: "
        f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
        f"({left} bulk still queued when the last code was enqueued)  "
        f"target {TARGETS['critical_p99']}",
        flush=True,
    )
    return [
        check("critical lane p99 enqueue -> accepted, s", p99, "<=", 1.0),
        check("bulk intents still queued after the last login code", left, ">=", 1),
    ]


def latency_backlog(bench: Bench, args, rates: dict[int, float], samples: int) -> int:
    """A bulk backlog that 2 workers cannot drain before the last login code is enqueued:
    1.5x what they send at their measured rate over the sampling time and start-up."""
    rate = rates.get(2) or worker_rate(bench, 2, args.messages).rate
    sampling_seconds = samples * LOGIN_CODE_SPACING_SECONDS + 10
    return max(20_000, int(1.5 * rate * sampling_seconds / 0.95))


if __name__ == "__main__":
    main()
