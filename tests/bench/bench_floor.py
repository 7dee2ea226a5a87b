"""The least CPU a message any sender keeping the `data_sent` promise on PostgreSQL spends.

The bare client of ``bench_send`` (render, serialize, aiosmtplib's ``sendmail`` over 4
connections, to the same counting sink) runs beside the same client that also commits the
worker's own ``data_sent`` mark (``postgres_sql.MARK_DATA_SENT_UNLESS_SUPPRESSED``, on a
leased attempt of a migrated, durable database) before each body: one statement awaited
on a psycopg ``AsyncConnection`` of its own per connection, autocommit, no pool, no
timer, no claim, no record. Alternately, `--repeat` times; the median CPU ms a message of
this process, and the second over the first. The worker's CPU over the bare client's
(``bench_send``) cannot fall below that ratio while each body waits for its own mark.

    python -m tests.bench.bench_floor                 # 2,000 messages, 3 runs each
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiosmtplib  # noqa: E402
import psycopg  # noqa: E402

from console.engine import postgres_sql as q  # noqa: E402
from console.mail.catalog import default_catalog  # noqa: E402
from console.store import suppressions  # noqa: E402
from tests.bench.bench_marks import leased  # noqa: E402
from tests.bench.bench_send import one_message, timed  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

CONNECTIONS = 4


def mark_values(attempt_id: int, recipient: str) -> dict:
    """The mark's values as the PostgreSQL engine binds them."""
    forms = suppressions.recipient_forms(recipient)
    return {"b_id": attempt_id, "b_address": forms[0], "b_address_hash": forms[-1]}


async def send_all(port: int, conninfo: str | None, attempts: list, count: int) -> None:
    """Render, serialize and send `count` messages over CONNECTIONS clients; with
    `conninfo`, each body after its own committed mark of the next of `attempts`."""
    catalog = default_catalog()

    async def one_connection(share: range) -> None:
        database = (
            await psycopg.AsyncConnection.connect(conninfo, autocommit=True) if (conninfo) else None
        )
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, local_hostname="bench")
        await client.connect()
        for n in share:
            recipient, body = one_message(n, catalog)
            if database is not None:
                cursor = await database.execute(q.MARK_DATA_SENT_UNLESS_SUPPRESSED,
                                                mark_values(*attempts[n]))  # fmt: skip
                if cursor.rowcount != 1:
                    raise RuntimeError(f"attempt {attempts[n][0]} was not marked")
            await client.sendmail("shop@example.com", [recipient], body)
        await client.quit()
        if database is not None:
            await database.close()

    shares = [range(i, count, CONNECTIONS) for i in range(CONNECTIONS)]
    await asyncio.gather(*(one_connection(share) for share in shares))


def one_run(port: int, conninfo: str | None, attempts: list, count: int):
    return timed(count, lambda: asyncio.run(send_all(port, conninfo, attempts, count)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    cluster = pgcluster.start_cluster(durable=True)
    sink = SubprocessSMTPServer.start()
    bare, marked = [], []
    try:
        for number in range(args.repeat):
            url = pgcluster.create_database(cluster, f"floor{number}")
            engine, attempts = leased(url, args.messages)
            engine.dispose()
            conninfo = url.replace("postgresql+psycopg://", "postgresql://")
            bare.append(one_run(sink.port, None, [], args.messages))
            marked.append(one_run(sink.port, conninfo, attempts, args.messages))
            print(f"run {number + 1}: bare {bare[-1].cpu_ms:.3f} ms, with the mark "
                  f"{marked[-1].cpu_ms:.3f} ms a message", flush=True)  # fmt: skip
    finally:
        sink.stop()
        cluster.stop()
    bare_ms = statistics.median(r.cpu_ms for r in bare)
    marked_ms = statistics.median(r.cpu_ms for r in marked)
    print(
        f"median CPU ms a message: bare client {bare_ms:.3f}, bare client + its mark "
        f"{marked_ms:.3f}: {marked_ms / bare_ms:.2f}× (the worker's target: at most 2×)"
    )


if __name__ == "__main__":
    main()
