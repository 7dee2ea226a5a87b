"""Profile: the worker's CPU per message, broken down by phase, over one drain.

Each phase's functions are wrapped to add up the CPU time of the thread that runs
them (``time.thread_time``): the claim (T1), compose (render + header checks +
serialize), the ``data_sent`` mark (with its suppression check), the records (T2,
a batch at a time), logging, metrics, and the decision (classify + retry policy). A
coroutine is timed step by step, from each resumption to its next suspension, so
what other tasks run while it waits is not its own. What the event loop's thread
spends outside the phases is the transport (aiosmtplib, asyncio). Figures are CPU
milliseconds per message of this process; the sink runs in another process and is not
counted.

    python -m tests.bench.profile_send                     # 5,000 messages, both databases
    python -m tests.bench.profile_send -n 2000 --backends sqlite --connections 4
"""

from __future__ import annotations

import argparse
import collections
import functools
import inspect
import logging
import resource
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.bench_send import database_url, worker_with_backlog  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

PHASES = (
    ("claim (T1)", "console.worker.loop", "Worker._claim"),
    ("housekeeping", "console.worker.loop", "Worker._housekeeping"),
    ("compose", "console.worker.loop", "compose"),
    ("serialize", "console.mail.serialize", "serialize_message"),
    # a coroutine is timed step by step: its CPU between suspensions only
    ("data_sent mark", "console.engine.sqlite", "SqliteEngine.mark"),
    ("data_sent mark", "console.engine.postgres", "PostgresEngine.mark"),
    ("record: compare-and-set", "console.engine.record_batches", "RecordBatches._write"),
    ("decision", "console.worker.loop", "classify"),
    ("decision", "console.worker.decisions", "SendDecisions.after_attempt"),
    ("record: what follows it", "console.worker.outcomes", "OutcomeWriter._writes_after"),
    ("record: breaker", "console.worker.guard", "SendGuard.writes_after"),
    ("statement binding (SQLite)", "console.engine.sqlite_prepared", "Prepared.parameters"),
    ("logging", "console.worker.reporting", "log_decision"),
    ("metrics", "console.worker.reporting", "record_attempt"),
)


class PhaseClock:
    """CPU seconds per phase, added up across threads; a nested phase counts apart from its
    caller (the caller's figure is its own time only)."""

    def __init__(self) -> None:
        self.seconds: collections.Counter[str] = collections.Counter()
        self.main_thread_seconds = 0.0  # of all phases, on the event loop's thread
        self._stack = threading.local()

    def _enter(self) -> list:
        stack = self._stack.__dict__.setdefault("frames", [])
        frame = [time.thread_time(), 0.0]  # started, CPU of nested phases
        stack.append(frame)
        return frame

    def _leave(self, phase: str, frame: list) -> None:
        stack = self._stack.frames
        stack.pop()
        elapsed = time.thread_time() - frame[0]
        self.seconds[phase] += elapsed - frame[1]
        if threading.current_thread() is threading.main_thread():
            self.main_thread_seconds += elapsed - frame[1]
        if stack:
            stack[-1][1] += elapsed

    def timed(self, phase: str, function):
        clock = self
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def timed_coroutine(*args, **kwargs):
                return await TimedSteps(clock, phase, function(*args, **kwargs))

            return timed_coroutine

        @functools.wraps(function)
        def timed_function(*args, **kwargs):
            frame = clock._enter()
            try:
                return function(*args, **kwargs)
            finally:
                clock._leave(phase, frame)

        return timed_function


class TimedSteps:
    """Awaits `coroutine`, adding the CPU of each of its steps (from a resumption to the
    next suspension, what it awaits included) to `phase`: the time other tasks run while
    it waits is theirs."""

    def __init__(self, clock: PhaseClock, phase: str, coroutine) -> None:
        self.clock, self.phase, self.coroutine = clock, phase, coroutine

    def __await__(self):
        sent, thrown = None, None
        while True:
            frame = self.clock._enter()
            try:
                if thrown is None:
                    yielded = self.coroutine.send(sent)
                else:
                    yielded = self.coroutine.throw(thrown)
            except StopIteration as stop:
                return stop.value
            finally:
                self.clock._leave(self.phase, frame)
            try:
                sent, thrown = (yield yielded), None
            except BaseException as error:  # noqa: BLE001 - handed to the coroutine
                sent, thrown = None, error


@contextmanager
def instrumented(clock: PhaseClock):
    """Wrap every phase's function for the duration of the block."""
    import importlib

    undo = []
    for phase, module_name, dotted in PHASES:
        owner = importlib.import_module(module_name)
        *path, name = dotted.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, clock.timed(phase, original))
        undo.append((owner, name, original))
    # compose calls serialize_message through its own module's name
    import console.mail.serialize as serialize_module
    import console.worker.sending as compose_module

    compose_module.serialize_message = serialize_module.serialize_message
    try:
        yield
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)
        compose_module.serialize_message = serialize_module.serialize_message


def process_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def profile_drain(url: str, smtp_url: str, count: int, connections: int) -> dict:
    """Drain `count` order confirmations with phase clocks on; CPU ms per message."""
    engine, _, worker = worker_with_backlog(url, smtp_url, count, connections)
    clock = PhaseClock()
    with instrumented(clock):
        cpu_started, main_started = process_cpu_seconds(), time.thread_time()
        wall_started = time.perf_counter()
        while worker.run_once().claimed:
            pass
        wall = time.perf_counter() - wall_started
        main_cpu = time.thread_time() - main_started
        process_cpu = process_cpu_seconds() - cpu_started
    worker.close()
    engine.dispose()
    per_message = {phase: 1000 * s / count for phase, s in clock.seconds.items()}
    per_message["transport + event loop (rest of the main thread)"] = (
        1000 * (main_cpu - clock.main_thread_seconds) / count
    )
    per_message["total, process"] = 1000 * process_cpu / count
    per_message["msg/s"] = count / wall
    return per_message


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=5000)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--pipelining", action="store_true", help="the sink offers PIPELINING")
    parser.add_argument("--chunking", action="store_true", help="the sink offers CHUNKING")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    workdir = Path(tempfile.mkdtemp(prefix="profile-send-"))
    cluster = pgcluster.start_cluster(durable=True) if "postgresql" in args.backends else None
    sink = SubprocessSMTPServer.start(pipelining=args.pipelining, chunking=args.chunking)
    figures = {}
    try:
        for number, backend in enumerate(args.backends, start=1):
            url = database_url(backend, cluster, workdir, number)
            figures[backend] = profile_drain(url, sink.url, args.messages, args.connections)
    finally:
        sink.stop()
        if cluster is not None:
            cluster.stop()
    print(f"N={args.messages} connections={args.connections}; CPU ms per message")
    phases = list(dict.fromkeys(name for f in figures.values() for name in f))
    print(f"{'phase':<52}" + "".join(f"{b:>12}" for b in figures))
    for phase in phases:
        cells = "".join(f"{f.get(phase, 0.0):>12.3f}" for f in figures.values())
        print(f"{phase:<52}{cells}")


if __name__ == "__main__":
    main()
