"""The data_sent mark alone: CPU and wall a mark through the worker's send store.

N intents are leased, then marked one after another on one store (SQLite: a file in a
temporary folder; PostgreSQL: a throwaway cluster, its durable defaults unless
``--fast``). Prints µs a mark; nothing is asserted.

    python -m tests.bench.bench_marks                 # both databases, 3,000 marks
    python -m tests.bench.bench_marks --backends postgresql -n 5000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from console.engine import engine_for  # noqa: E402
from console.store.database import make_engine, make_session_factory  # noqa: E402
from tests.conftest import migrate_to_head  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.claim_steps import lease_all, lock, queue  # noqa: E402


def leased(url: str, count: int):
    migrate_to_head(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    for _ in range(count):
        queue(factory)
    with factory() as session:
        held = lease_all(session, lock(session, limit=count))
        session.commit()
    return engine, [(claim.attempt_id, claim.intent.recipient) for claim in held]


async def marked(engine, attempts) -> tuple[float, float]:
    """CPU and wall seconds of marking `attempts` after the first (which opens and prepares)."""
    store = engine_for(engine)
    try:
        await store.mark(*attempts[0])
        cpu, wall = time.process_time(), time.perf_counter()
        for attempt_id, recipient in attempts[1:]:
            if await store.mark(attempt_id, recipient) is not None:
                raise RuntimeError(f"attempt {attempt_id} was refused")
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await store.close()


def run(backend: str, url: str, count: int) -> None:
    engine, attempts = leased(url, count)
    try:
        cpu, wall = asyncio.run(marked(engine, attempts))
    finally:
        engine.dispose()
    marks = len(attempts) - 1
    print(f"{backend:<11} {marks} marks: CPU {cpu / marks * 1e6:.0f} µs a mark, "
          f"wall {wall / marks * 1e6:.0f} µs", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--marks", type=int, default=3000)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--fast", action="store_true", help="PostgreSQL with fsync off")
    args = parser.parse_args(argv)
    if "sqlite" in args.backends:
        with tempfile.TemporaryDirectory() as folder:
            run("sqlite", f"sqlite:///{folder}/marks.db", args.marks)
    if "postgresql" in args.backends:
        cluster = pgcluster.start_cluster(durable=not args.fast)
        try:
            run("postgresql", pgcluster.create_database(cluster, "marks"), args.marks)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
