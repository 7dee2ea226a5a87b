"""The cost of the shared send budget per claim, on SQLite and on PostgreSQL.

A claim is timed as the worker runs it on an empty queue (``lock_due`` and the
commit), with no budget (no statement for it), with ``CONSOLE_SEND_RATE`` (the
bucket's ``UPDATE ... RETURNING`` and the give-back of unused tokens) and with a
rate and a daily quota (plus the hourly count's read). The bucket's ``take``
statement is also timed alone, one transaction each. Figures are printed, never
asserted.

    python -m tests.bench.bench_send_budget                # 2,000 claims, median of 3
    python -m tests.bench.bench_send_budget --claims 5000 --repeat 5 --backend sqlite
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from console.core.token_bucket import BucketPolicy, DailyQuota
from console.engine import Engine, engine_for
from console.models import utcnow
from console.store import claims
from console.store.database import make_engine
from console.worker.claim import SendBudget
from tests.conftest import migrate_to_head
from tests.support import pgcluster

BATCH_SIZE = 50
RATE = BucketPolicy.of(1000.0)  # never short of tokens: an empty claim gives all of them back
BUDGETS: dict[str, SendBudget | None] = {
    "no rate": None,
    "rate": SendBudget(RATE, None),
    "rate + quota": SendBudget(RATE, DailyQuota.of(1_000_000)),
}


async def claim_once(engine: Engine, budget: SendBudget | None) -> None:
    """The budget's part of ``BatchClaimer.claim`` around an empty ``lock_due``."""
    now = utcnow()
    batch_size = BATCH_SIZE
    async with engine.claiming() as steps:
        limits = claims.lane_limits_within(batch_size, None)
        if budget:
            limits, granted = await budget.lane_limits(steps, now, limits, batch_size)
            batch_size = granted.batch_limit(batch_size)
        await steps.lock_due(now, batch_size, limits)
        if budget:
            await budget.settle(steps, now, granted, {})


async def take_once(engine: Engine) -> None:
    """The bucket's statement alone, in its own transaction."""
    async with engine.claiming() as steps:
        await steps.take_tokens(RATE, time.time(), 1)


async def per_call_us(call: Callable[[], Awaitable[None]], count: int, repeat: int) -> float:
    """Median over `repeat` runs of the mean microseconds a call takes."""
    for _ in range(min(count, 100)):  # warm up the pool and the statement caches
        await call()
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(count):
            await call()
        runs.append((time.perf_counter() - started) / count * 1e6)
    return statistics.median(runs)


async def figures_of(database, count: int, repeat: int) -> tuple[dict[str, float], float]:
    engine = engine_for(database)
    try:
        figures = {
            name: await per_call_us(lambda b=budget: claim_once(engine, b), count, repeat)
            for name, budget in BUDGETS.items()
        }
        return figures, await per_call_us(lambda: take_once(engine), count, repeat)
    finally:
        await engine.close()


def measure(label: str, url: str, count: int, repeat: int) -> None:
    database = make_engine(url)
    try:
        figures, take = asyncio.run(figures_of(database, count, repeat))
    finally:
        database.dispose()
    base = figures["no rate"]
    for name, micros in figures.items():
        print(
            f"{label:<10} claim, {name:<12} {micros:8.0f} µs"
            f"  (+{micros - base:5.0f} µs, {micros / base:.2f}x)"
        )
    print(f"{label:<10} take statement + commit alone {take:8.0f} µs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args(argv)
    print(f"{args.claims} empty claims, median of {args.repeat}, at {dt.datetime.now():%H:%M}")
    with tempfile.TemporaryDirectory() as workdir:
        if args.backend in ("sqlite", "both"):
            url = f"sqlite:///{Path(workdir) / 'bench.db'}"
            migrate_to_head(url)
            measure("SQLite", url, args.claims, args.repeat)
        if args.backend in ("postgresql", "both"):
            cluster = pgcluster.start_cluster(durable=True)
            try:
                url = pgcluster.create_database(cluster, "bench_budget")
                migrate_to_head(url)
                measure("PostgreSQL", url, args.claims, args.repeat)
            finally:
                cluster.stop()


if __name__ == "__main__":
    main()
