"""Benchmark: how fast peers drain a queue of N messages to the same SMTP sink.

Each run fills a fresh queue with N order confirmations (untimed), then starts the
sender as a process and times it from that start until the sink has counted the Nth
message: start-up, claiming, sending and bookkeeping, as an operator would see it.

- ``django-post-office``: ``send_queued_mail`` (its defaults: no Celery, 1 process of
  5 threads, each with an SMTP connection kept for a batch of 100, a log row a message)
  on SQLite;
- ``django-mailer``: ``send_mail`` (one pass over the queue: a transaction, a log row
  and a new SMTP connection a message) on SQLite;
- ``console worker`` at its default settings (CONSOLE_DATABASE_URL and CONSOLE_SMTP_URL
  only) on SQLite and on a durable PostgreSQL; it is stopped with SIGTERM at N.

The two Django apps run from a virtualenv of their own, made (and then reused) under
``~/.cache/console-bench-peers/venv`` with pip; nothing of them is imported here. They
get the order confirmations already rendered (subject, text and HTML from the
product's own template), as both render or serialize a message when it is queued;
``console worker`` renders each one while it sends. Every sender talks to one counting
sink (aiosmtpd in another process, answering 250). Runs alternate (post-office, mailer,
console on SQLite, console on PostgreSQL, then again), so drift hits each alike.

    python -m tests.bench.bench_peers                       # 3 rounds of 2,000 messages
    python -m tests.bench.bench_peers --rounds 1 --messages 300

The last table gives each sender's median msg/s and its ratio to django-post-office
("× post-office"): 2.00 drains the same queue in half post-office's time. Each run also
says whose CPU it spent, in milliseconds a message (``tests.support.cpu_split``): the
sender's process, PostgreSQL's (its backends) and the sink's. On a machine with few
cores they share the same cores, so a sender that burns less leaves more to the others.

``--console-env NAME=VALUE`` (repeatable) sets a variable for every ``console worker``
run, to compare a setting against the defaults in one sitting.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import console  # noqa: E402
from console.config import Settings  # noqa: E402
from console.mail.catalog import default_catalog  # noqa: E402
from console.store.database import make_engine, make_session_factory  # noqa: E402
from console.worker.decisions import batch_size_for  # noqa: E402
from tests.bench.bench_send import TEMPLATE, database_url, enqueue_orders, order_params  # noqa: E402
from tests.support import pgcluster  # noqa: E402
from tests.support.commands import CONSOLE_BIN  # noqa: E402
from tests.support.cpu_split import CpuMeter, CpuSplit, postmaster_pid  # noqa: E402
from tests.support.smtp_server import SubprocessSMTPServer  # noqa: E402

VENV_DIR = Path.home() / ".cache" / "console-bench-peers" / "venv"
PEER_REQUIREMENTS = ("django>=5.2,<5.3", "django-post-office==3.12.0", "django-mailer==2.3.2")
PEER_DISTRIBUTIONS = ("django", "django-post-office", "django-mailer")
PIP_TIMEOUT_SECONDS = 600
SETUP_TIMEOUT_SECONDS = 300
RUN_TIMEOUT_SECONDS = 300.0
EXIT_GRACE_SECONDS = 30.0  # a Django command past the Nth message finishes its bookkeeping
COUNT_POLL_SECONDS = 0.01
DEFAULTS = Settings(database_url="", secret_key="")  # what `console worker` runs with here
MAIL_FROM = DEFAULTS.mail_from
PEERS = ("post-office", "mailer", "console-sqlite", "console-postgresql")
LABELS = {
    "post-office": "django-post-office",
    "mailer": "django-mailer",
    "console-sqlite": "console worker, SQLite",
    "console-postgresql": "console worker, PostgreSQL",
}

DJANGO_SETTINGS = """\
import os

SECRET_KEY = "bench-peers-not-secret"
USE_TZ = True
INSTALLED_APPS = ["post_office", "mailer"]
DATABASES = {{
    "default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["BENCH_DATABASE"]}}
}}
TEMPLATES = [{{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}}]
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = "127.0.0.1"
EMAIL_PORT = {port}
EMAIL_USE_TLS = False
EMAIL_USE_SSL = False
DEFAULT_FROM_EMAIL = {mail_from!r}
POST_OFFICE = {{"CELERY_ENABLED": False}}
"""

FILL_QUEUE = """\
import json
import sys

import django

django.setup()
from django.conf import settings
from django.db import transaction

peer, messages_path = sys.argv[1:]
with open(messages_path) as messages_file:
    messages = json.load(messages_file)
with transaction.atomic():
    if peer == "post-office":
        from post_office import mail

        for m in messages:
            mail.send(
                recipients=[m["to"]],
                sender=settings.DEFAULT_FROM_EMAIL,
                subject=m["subject"],
                message=m["text"],
                html_message=m["html"],
                priority="medium",
            )
    else:
        import mailer

        for m in messages:
            mailer.send_html_mail(
                m["subject"], m["text"], m["html"], settings.DEFAULT_FROM_EMAIL, [m["to"]]
            )
"""

VERSIONS = """\
import importlib.metadata, json, sys
print(json.dumps({name: importlib.metadata.version(name) for name in sys.argv[1:]}))
"""


@dataclasses.dataclass
class Outcome:
    """One timed run: seconds from the process's start, and what the sink counted."""

    peer: str
    seconds: float
    delivered: int
    problem: str | None = None  # None: all N delivered within the time limit
    cpu: CpuSplit | None = None  # CPU seconds spent during the run, by whom

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds


@dataclasses.dataclass
class Launch:
    """A sender ready to be timed: its command line, environment and what ends it."""

    command: list[str]
    env: dict[str, str]
    exits_when_done: bool  # a Django command stops by itself; `console worker` polls on


class SinkCount:
    """Messages the shared sink has accepted since `start_run()`, from its record file."""

    def __init__(self, record_path: Path) -> None:
        self._records = open(record_path, "rb")  # noqa: SIM115 - read for the whole bench
        self._accepted = 0

    def start_run(self) -> None:
        self._records.seek(0, os.SEEK_END)
        self._accepted = 0

    def accepted(self) -> int:
        self._records.seek(0, os.SEEK_CUR)  # forget a cached end of file
        self._accepted += self._records.read().count(b"\n")
        return self._accepted

    def close(self) -> None:
        self._records.close()


# --- the peers' virtualenv and Django project ----------------------------------------------


def peer_python() -> Path:
    """The peers' interpreter, with the Django apps installed; exit with pip's words if not."""
    python = VENV_DIR / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *PEER_REQUIREMENTS],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_SECONDS,
    )
    if install.returncode != 0:
        tail = "\n".join(install.stderr.strip().splitlines()[-15:])
        raise SystemExit(
            f"pip could not install {' '.join(PEER_REQUIREMENTS)} into {VENV_DIR}:\n{tail}"
        )
    return python


def peer_versions(python: Path) -> dict[str, str]:
    shown = subprocess.run(
        [str(python), "-c", VERSIONS, *PEER_DISTRIBUTIONS],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(shown.stdout)


class DjangoProject:
    """A settings module, a migrated SQLite template and the queue filler, in `folder`."""

    def __init__(self, python: Path, folder: Path, sink_port: int, messages: list[dict]):
        self.python, self.folder = python, folder
        folder.mkdir()
        (folder / "bench_settings.py").write_text(
            DJANGO_SETTINGS.format(port=sink_port, mail_from=MAIL_FROM)
        )
        (folder / "fill_queue.py").write_text(FILL_QUEUE)
        self.messages_path = folder / "messages.json"
        self.messages_path.write_text(json.dumps(messages))
        self.template_database = folder / "template.sqlite3"
        self._django(["-m", "django", "migrate", "--verbosity", "0"], self.template_database)
        self._runs = 0

    def environment(self, database: Path) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench_settings",
            "PYTHONPATH": str(self.folder),
            "BENCH_DATABASE": str(database),
        }

    def _django(self, arguments: list[str], database: Path) -> None:
        done = subprocess.run(
            [str(self.python), *arguments],
            env=self.environment(database),
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(arguments)} failed:\n{done.stderr[-3000:]}")

    def filled_database(self, peer: str) -> Path:
        """A fresh copy of the migrated database, with the queue of `peer` filled."""
        self._runs += 1
        database = self.folder / f"{peer}-{self._runs}.sqlite3"
        shutil.copyfile(self.template_database, database)
        self._django([str(self.folder / "fill_queue.py"), peer, str(self.messages_path)], database)
        return database

    def launch(self, peer: str) -> Launch:
        database = self.filled_database(peer)
        if peer == "post-office":
            lockfile = str(self.folder / f"post_office-{self._runs}")  # not the shared /tmp one
            command = ["send_queued_mail", "--lockfile", lockfile]
        else:
            command = ["send_mail"]  # its lock file: send_mail.lock in the run's directory
        return Launch(
            [str(self.python), "-m", "django", *command], self.environment(database), True
        )


def rendered_messages(count: int) -> list[dict]:
    """The order confirmations `console worker` sends, rendered beforehand for the peers."""
    catalog = default_catalog()
    messages = []
    for n in range(count):
        parts = catalog.render(TEMPLATE, 1, order_params(n))
        messages.append(
            {
                "to": f"customer{n}@example.com",  # as bench_send.enqueue_orders addresses them
                "subject": parts.subject,
                "text": parts.text,
                "html": parts.html,
            }
        )
    return messages


# --- the product ---------------------------------------------------------------------------


class ConsoleQueues:
    """Fresh migrated databases with N intents enqueued, and `console worker` to drain them."""

    def __init__(
        self, workdir: Path, cluster, sink_url: str, messages: int, settings: dict[str, str]
    ) -> None:
        self.workdir, self.cluster = workdir, cluster
        self.sink_url, self.messages = sink_url, messages
        self.settings = settings  # --console-env: set for every run
        self._databases = 0
        # byte code written first, as `pip install` leaves it for an installed package
        compileall.compile_dir(Path(console.__file__).parent, quiet=1)

    def launch(self, backend: str) -> Launch:
        self._databases += 1
        url = database_url(backend, self.cluster, self.workdir, self._databases)
        engine = make_engine(url)
        enqueue_orders(make_session_factory(engine), self.messages)
        engine.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
        env.update(CONSOLE_DATABASE_URL=url, CONSOLE_SMTP_URL=self.sink_url, **self.settings)
        return Launch([CONSOLE_BIN, "worker"], env, exits_when_done=False)


def console_defaults() -> str:
    rate = f"{DEFAULTS.send_rate} msg/s" if DEFAULTS.send_rate else "none (CONSOLE_SEND_RATE unset)"
    return (
        f"{DEFAULTS.smtp_connections} SMTP connection(s), claims of "
        f"{batch_size_for(DEFAULTS.batch_size, DEFAULTS.smtp_connections)}, poll every "
        f"{DEFAULTS.poll_seconds:g} s, log level {DEFAULTS.log_level}, send-rate limit: {rate}"
    )


# --- one timed run -------------------------------------------------------------------------


def timed_drain(
    peer: str, launch: Launch, sink: SinkCount, total: int, log_path: Path, meter: CpuMeter
):
    """Start `launch` and time it until the sink has counted `total` messages; the CPU
    spent from its start until it has exited."""
    sink.start_run()
    cpu_before = meter.read()
    with open(log_path, "w") as log:
        started = time.perf_counter()
        process = subprocess.Popen(
            launch.command,
            env=launch.env,
            cwd=log_path.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, ended as one below
        )
    try:
        seconds, problem = wait_for_total(process, sink, total, started)
    finally:
        stop(process, graceful=launch.exits_when_done)
    return Outcome(peer, seconds, sink.accepted(), problem, meter.read() - cpu_before)


def wait_for_total(process: subprocess.Popen, sink: SinkCount, total: int, started: float):
    """Seconds until `total` messages reached the sink, and what went wrong if they did not."""
    while True:
        elapsed = time.perf_counter() - started
        if sink.accepted() >= total:
            return elapsed, None
        if process.poll() is not None:
            if sink.accepted() >= total:
                return elapsed, None
            return elapsed, f"exited with code {process.returncode}"
        if elapsed > RUN_TIMEOUT_SECONDS:
            return elapsed, f"did not finish within {RUN_TIMEOUT_SECONDS:.0f} s: killed"
        time.sleep(COUNT_POLL_SECONDS)


def stop(process: subprocess.Popen, *, graceful: bool) -> None:
    """Let a command that ends by itself finish; SIGTERM, then SIGKILL, its process group."""
    if graceful:
        try:
            process.wait(EXIT_GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            pass
    for stop_signal, wait_seconds in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, stop_signal)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_seconds)
        except subprocess.TimeoutExpired:
            continue


# --- report --------------------------------------------------------------------------------


def run_line(round_number: int, outcome: Outcome, total: int) -> str:
    line = (
        f"round {round_number}  {LABELS[outcome.peer]:<28}{outcome.seconds:>8.2f} s"
        f"{outcome.rate:>9.0f} msg/s"
    )
    if outcome.cpu is not None:
        line += f"   CPU ms a message: {cpu_cells(outcome.cpu.per_message_ms(total))}"
    if outcome.problem:
        line += f"  INCOMPLETE: {outcome.delivered} of {total}, {outcome.problem}"
    return line


def cpu_cells(split: CpuSplit) -> str:
    return f"sender {split.sender:.2f}, PostgreSQL {split.postgres:.2f}, sink {split.sink:.2f}"


def summary_lines(outcomes: list[Outcome], peers: list[str], total: int) -> list[str]:
    """Median msg/s of each sender's complete runs, and its ratio to django-post-office;
    then the median CPU a message each spent, by whom."""
    medians = {}
    for peer in peers:
        rates = [o.rate for o in outcomes if o.peer == peer and o.problem is None]
        medians[peer] = statistics.median(rates) if rates else None
    baseline = medians.get("post-office")
    lines = [f"{'sender':<28}{'median msg/s':>14}{'× post-office':>16}{'complete runs':>15}"]
    for peer in peers:
        complete = sum(1 for o in outcomes if o.peer == peer and o.problem is None)
        runs = sum(1 for o in outcomes if o.peer == peer)
        median = medians[peer]
        shown = f"{median:.0f}" if median else "-"
        ratio = f"{median / baseline:.2f}" if median and baseline else "n/a"
        lines.append(f"{LABELS[peer]:<28}{shown:>14}{ratio:>16}{f'{complete}/{runs}':>15}")
    return lines + cpu_summary_lines(outcomes, peers, total)


def cpu_summary_lines(outcomes: list[Outcome], peers: list[str], total: int) -> list[str]:
    """Each sender's median CPU a message over its complete runs, by whom (ms)."""
    lines = ["CPU ms a message, medians (the sender's process, PostgreSQL, the sink):"]
    for peer in peers:
        splits = [o.cpu for o in outcomes if o.peer == peer and o.problem is None and o.cpu]
        if not splits:
            continue
        median = CpuSplit(
            *(statistics.median(getattr(s, part) for s in splits) for part in CPU_PARTS)
        )
        per_message = median.per_message_ms(total)
        lines.append(f"{LABELS[peer]:<28}{cpu_cells(per_message)}; all {per_message.total:.2f}")
    return lines


CPU_PARTS = ("sender", "postgres", "sink")


def header_lines(args, versions: dict[str, str]) -> list[str]:
    installed = ", ".join(f"{name} {version}" for name, version in versions.items())
    return [
        f"N={args.messages} messages a run, {args.rounds} round(s), sink=aiosmtpd in another "
        f"process, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        f"peers: {installed} on SQLite at Django's defaults; post-office: "
        "CELERY_ENABLED=False, 1 process x 5 threads (an SMTP connection each), batches "
        "of 100; mailer: one pass, a new SMTP connection a message",
        f"console worker defaults: {console_defaults()}"
        + "".join(f"; {name}={value}" for name, value in args.console_settings.items()),
        "timed: from the process's start to the Nth message counted by the sink",
    ]


# --- main ----------------------------------------------------------------------------------


def launchers(peers: list[str], django: DjangoProject | None, queues: ConsoleQueues):
    """For each sender, a function that prepares a fresh queue and says how to start it."""
    table: dict[str, Callable[[], Launch]] = {
        "console-sqlite": lambda: queues.launch("sqlite"),
        "console-postgresql": lambda: queues.launch("postgresql"),
    }
    if django is not None:
        table["post-office"] = lambda: django.launch("post-office")
        table["mailer"] = lambda: django.launch("mailer")
    return {peer: table[peer] for peer in peers}


def run_rounds(
    args, launch_for: dict, sink: SinkCount, workdir: Path, meter: CpuMeter
) -> list[Outcome]:
    outcomes = []
    for round_number in range(1, args.rounds + 1):
        for peer, prepare in launch_for.items():
            log_path = workdir / f"{peer}-{round_number}.log"
            outcome = timed_drain(peer, prepare(), sink, args.messages, log_path, meter)
            outcomes.append(outcome)
            print(run_line(round_number, outcome, args.messages), flush=True)
            if outcome.problem:
                print(f"    its log: {log_tail(log_path)}", flush=True)
    return outcomes


def log_tail(log_path: Path, lines: int = 5) -> str:
    return " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-lines:])


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each sender, alternated")
    parser.add_argument("--messages", type=int, default=2000, help="queued messages a run")
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument(
        "--console-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a CONSOLE_ variable for every console worker run (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        args.console_settings = console_settings(args.console_env)
    except ValueError as error:
        parser.error(str(error))
    return args


def console_settings(assignments: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as a dict; each name a ``CONSOLE_`` variable."""
    settings = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name.startswith("CONSOLE_"):
            raise ValueError(f"--console-env takes CONSOLE_NAME=VALUE, got {assignment!r}")
        settings[name] = value
    return settings


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    wants_django = {"post-office", "mailer"} & set(args.peers)
    python = peer_python() if wants_django else None
    versions = peer_versions(python) if python else {}
    workdir = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    wants_postgres = "console-postgresql" in args.peers
    cluster = pgcluster.start_cluster(durable=True) if wants_postgres else None
    sink_server = SubprocessSMTPServer.start(record_path=workdir / "sink.jsonl")
    sink = SinkCount(workdir / "sink.jsonl")
    try:
        django = None
        if python:
            messages = rendered_messages(args.messages)
            django = DjangoProject(python, workdir / "django", sink_server.port, messages)
        queues = ConsoleQueues(
            workdir, cluster, sink_server.url, args.messages, args.console_settings
        )
        for line in header_lines(args, versions):
            print(line, flush=True)
        postmaster = postmaster_pid(cluster.data_dir) if cluster is not None else None
        meter = CpuMeter(sink_pid=sink_server.process.pid, postmaster_pid=postmaster)
        launch_for = launchers(args.peers, django, queues)
        outcomes = run_rounds(args, launch_for, sink, workdir, meter)
    finally:
        sink.close()
        sink_server.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    for line in summary_lines(outcomes, args.peers, args.messages):
        print(line)


if __name__ == "__main__":
    main()
