"""Where PostgreSQL's time goes while the worker drains: each statement's calls and
execution time a message, beside the server's whole CPU a message.

A durable cluster (fsync and synchronous commits on) is started with
``pg_stat_statements`` preloaded; `N` order confirmations are enqueued, the counters reset,
and the worker (as ``console worker`` runs it, over ``--connections`` SMTP connections to a
counting sink) drains them in this process. The server's CPU is the postmaster's and every
backend's (``tests.support.cpu_split``); what the statements' execution does not explain
is the per-statement protocol work, the commits and the server's own processes.

``--schema-change FILE`` runs that file's SQL on the migrated database before the enqueue
(an index or storage experiment: say, an index made partial or a table's fillfactor).
``--synchronous-commit off`` sets that for the drain's database, for a diagnosis only: it
shows what the commits that wait for the disk cost. The worker's guarantees rest on them
(the ``data_sent`` mark must be on disk before the body leaves).

    python -m tests.bench.bench_pg_statements                 # 3,000 messages
    python -m tests.bench.bench_pg_statements -n 2000 --synchronous-commit off
    python -m tests.bench.bench_pg_statements --schema-change partial-indexes.sql
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psycopg  # noqa: E402

from tests.bench.bench_send import database_url, worker_with_backlog  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.cpu_split import CpuMeter, postmaster_pid  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

STATEMENTS = """
SELECT calls, total_exec_time, rows, regexp_replace(query, '\\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC
"""


def dsn(cluster: pgcluster.Cluster, database: str) -> str:
    return f"host=127.0.0.1 port={cluster.port} user=postgres dbname={database}"


def prepared_database(
    cluster: pgcluster.Cluster, synchronous_commit: str, schema_change: str | None
) -> tuple[str, str]:
    """A migrated database with the statistics' extension (and `schema_change` made): its
    URL and name."""
    url = database_url("postgresql", cluster, Path(tempfile.mkdtemp()), 1)
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(dsn(cluster, name), autocommit=True) as connection:
        connection.execute("CREATE EXTENSION pg_stat_statements")
        connection.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = {synchronous_commit}')
        if schema_change:
            connection.execute(schema_change)
    return url, name


def drain(url: str, sink_url: str, messages: int, connections: int, meter: CpuMeter, reset):
    """Drain `messages` with the worker: seconds and the server's CPU seconds."""
    _, _, worker = worker_with_backlog(url, sink_url, messages, connections)
    reset()
    before, started = meter.read(), time.perf_counter()
    while worker.run_once().claimed:
        pass
    seconds, spent = time.perf_counter() - started, meter.read() - before
    worker.close()
    return seconds, spent.postgres


def statement_lines(rows, messages: int, limit: int) -> list[str]:
    lines = [f"{'calls/msg':>10}{'exec ms/msg':>13}{'rows/msg':>10}  statement"]
    for calls, exec_ms, rows_done, query in rows[:limit]:
        lines.append(
            f"{calls / messages:>10.3f}{exec_ms / messages:>13.4f}"
            f"{rows_done / messages:>10.3f}  {query.strip()[:90]}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=3000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--synchronous-commit", choices=["on", "off"], default="on")
    parser.add_argument("--statements", type=int, default=12, help="how many to list")
    parser.add_argument("--schema-change", type=Path, help="SQL run before the enqueue")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)

    settings = {"shared_preload_libraries": "pg_stat_statements"}
    cluster = pgcluster.start_cluster(durable=True, settings=settings)
    sink = SubprocessSMTPServer.start()
    meter = CpuMeter(sink_pid=sink.process.pid, postmaster_pid=postmaster_pid(cluster.data_dir))
    try:
        change = args.schema_change.read_text() if args.schema_change else None
        url, name = prepared_database(cluster, args.synchronous_commit, change)
        with psycopg.connect(dsn(cluster, name), autocommit=True) as connection:

            def reset() -> None:
                connection.execute("SELECT pg_stat_statements_reset()")

            seconds, server_cpu = drain(
                url, sink.url, args.messages, args.connections, meter, reset
            )
            rows = connection.execute(STATEMENTS).fetchall()
    finally:
        sink.stop()
        cluster.stop()
    executed = sum(exec_ms for _, exec_ms, _, _ in rows)
    print(
        f"N={args.messages} connections={args.connections} synchronous_commit="
        f"{args.synchronous_commit}{' with ' + args.schema_change.name if change else ''}: "
        f"{args.messages / seconds:.0f} msg/s; PostgreSQL CPU "
        f"{1000 * server_cpu / args.messages:.3f} ms a message, of which statements "
        f"executing {executed / args.messages:.3f} ms"
    )
    for line in statement_lines(rows, args.messages, args.statements):
        print(line)


if __name__ == "__main__":
    main()
