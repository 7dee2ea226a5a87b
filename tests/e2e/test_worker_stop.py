"""A worker stopped by SIGTERM or SIGINT records its stop; one killed does not.

Real ``console worker`` and ``console serve`` processes on one database; the
dashboard then shows the stopped one grey with its time, the killed one red once
its heartbeat is old.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from sqlalchemy import select, update

from console.state_tables import WorkerHeartbeat
from console.store.database import make_engine, make_session_factory
from tests.support.commands import CONSOLE_BIN

START_SECONDS = 30
pytestmark = pytest.mark.slow


def environment(db_url: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    return {
        **environ,
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": "test" * 8,
        "CONSOLE_SMTP_URL": "smtp://127.0.0.1:9",  # nothing is queued: never dialled
        "CONSOLE_POLL_SECONDS": "0.2",
        "CONSOLE_LOG_LEVEL": "WARNING",
        "PYTHONFAULTHANDLER": "1",  # SIGABRT writes every thread's stack to the log
    }


def start(db_url: str, tmp_path, *command: str) -> subprocess.Popen:
    with open(tmp_path / f"{command[0]}.log", "ab") as log:
        return subprocess.Popen(
            [CONSOLE_BIN, *command], env=environment(db_url), cwd=tmp_path,
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def exit_status(process: subprocess.Popen, tmp_path, seconds: float = 30) -> int:
    """`process`'s exit status once it exits; past `seconds`, fail with its threads' stacks
    (SIGABRT, written by the fault handler into its log) so a stop that hangs says where."""
    try:
        return process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait(10)
        logs = "\n".join(path.read_text()[-6000:] for path in tmp_path.glob("*.log"))
        pytest.fail(f"pid {process.pid} did not stop within {seconds} s:\n{logs}")


def heartbeats(db_url: str) -> dict[int, WorkerHeartbeat]:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            return {row.pid: row for row in session.scalars(select(WorkerHeartbeat))}
    finally:
        engine.dispose()


def wait_for_beats(db_url: str, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not {p.pid for p in processes} <= set(heartbeats(db_url)):
        assert time.monotonic() < deadline, "the workers never ticked"
        assert all(p.poll() is None for p in processes), "a worker exited"
        time.sleep(0.1)


def age_heartbeats(db_url: str, minutes: int) -> None:
    """Move every heartbeat `minutes` into the past, as if that much time went by."""
    engine = make_engine(db_url)
    back = dt.timedelta(minutes=minutes)
    try:
        with engine.begin() as connection:
            for row in connection.execute(select(WorkerHeartbeat)).all():
                times = ("last_tick_at", "started_at", "stopped_at")
                moved = {name: getattr(row, name) - back for name in times if getattr(row, name)}
                statement = update(WorkerHeartbeat).filter_by(worker_id=row.worker_id)
                connection.execute(statement.values(**moved))
    finally:
        engine.dispose()


def worker_state(page: str, worker_id: str) -> tuple[str, str]:
    """The state cell of one worker's row: its classes and its words."""
    [row] = [r for r in re.findall(r"<tr>.*?</tr>", page, re.DOTALL) if worker_id in r]
    state = re.search(r'<span class="(status[^"]*)"[^>]*>([^<]*)</span>\s*</td>\s*</tr>', row)
    return state[1], html.unescape(state[2])


def test_sigterm_and_sigint_record_the_stop_and_sigkill_does_not(db_url, console_client, tmp_path):
    termed = start(db_url, tmp_path, "worker")
    interrupted = start(db_url, tmp_path, "worker")
    killed = start(db_url, tmp_path, "worker")
    try:
        wait_for_beats(db_url, [termed, interrupted, killed])
        termed.send_signal(signal.SIGTERM)
        interrupted.send_signal(signal.SIGINT)
        killed.send_signal(signal.SIGKILL)
        assert exit_status(termed, tmp_path) == 0
        assert exit_status(interrupted, tmp_path) == 0
        assert exit_status(killed, tmp_path) == -signal.SIGKILL
    finally:
        for process in (termed, interrupted, killed):
            process.kill()
    rows = heartbeats(db_url)
    for clean in (termed, interrupted):
        assert rows[clean.pid].stopped_at is not None
        assert rows[clean.pid].stopped_at >= rows[clean.pid].last_tick_at
    assert rows[killed.pid].stopped_at is None, "a killed worker records nothing"

    client = console_client("viewer")
    stopped = rows[termed.pid]
    words = f"stopped at {stopped.stopped_at:%H:%M} UTC"
    assert worker_state(client.get("/").text, stopped.worker_id) == ("status muted", words)
    assert worker_state(client.get("/").text, rows[killed.pid].worker_id)[1] == "alive"
    age_heartbeats(db_url, minutes=10)
    page = client.get("/").text
    moved = stopped.stopped_at - dt.timedelta(minutes=10)
    today = moved.date() == dt.datetime.now(dt.UTC).date()
    shown = f"{moved:%H:%M} UTC" if today else f"{moved:%Y-%m-%d %H:%M} UTC"
    assert worker_state(page, stopped.worker_id) == ("status muted", f"stopped at {shown}")
    killed_state = worker_state(page, rows[killed.pid].worker_id)
    assert killed_state == ("status status-failed", "stopped ticking")
    assert "0 workers alive" in html.unescape(page)


def test_console_serve_records_the_stop_of_its_embedded_worker(db_url, tmp_path):
    serve = start(db_url, tmp_path, "serve", "--port", "0")
    try:
        wait_for_beats(db_url, [serve])
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
    finally:
        serve.kill()
    row = heartbeats(db_url)[serve.pid]
    assert row.stopped_at is not None and row.stopped_at >= row.last_tick_at


# `console serve` whose ops jobs start only once its embedded worker has ticked, and that
# is sent the signal named by its first argument just before: a stop while serve is still
# starting up.
SERVE_STOPPED_WHILE_STARTING = """
import os, signal, sys, time
from sqlalchemy import text
import console.ops.jobs.schedule as schedule
from console.store.database import make_engine

start_ops_jobs = schedule.start_ops_jobs

def start_once_ticked_then_stop(settings):
    engine = make_engine(settings.database_url)
    deadline = time.monotonic() + 30
    beats = text("SELECT count(*) FROM worker_heartbeat WHERE pid = :pid")
    with engine.connect() as connection:
        while not connection.execute(beats, {"pid": os.getpid()}).scalar():
            if time.monotonic() > deadline:
                raise SystemExit("the embedded worker never ticked")
            connection.rollback()
            time.sleep(0.05)
    engine.dispose()
    os.kill(os.getpid(), getattr(signal, stop_signal))
    return start_ops_jobs(settings)

stop_signal = sys.argv[1]
schedule.start_ops_jobs = start_once_ticked_then_stop
from console.cli import main
sys.argv = ["console", "serve", "--port", "0"]
main()
"""


@pytest.mark.parametrize("stop_signal", ["SIGTERM", "SIGINT"])
def test_a_stop_while_serve_starts_up_stops_it_and_records_the_stop(db_url, tmp_path, stop_signal):
    with open(tmp_path / "serve.log", "ab") as log:
        serve = subprocess.Popen(
            [sys.executable, "-c", SERVE_STOPPED_WHILE_STARTING, stop_signal],
            env=environment(db_url),
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        assert exit_status(serve, tmp_path) == 0, (tmp_path / "serve.log").read_text()[-3000:]
    finally:
        serve.kill()
    row = heartbeats(db_url)[serve.pid]
    assert row.stopped_at is not None and row.stopped_at >= row.last_tick_at


def test_serve_on_a_taken_port_refuses_in_one_line_and_starts_no_worker(db_url, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as occupant:
        busy = occupant.getsockname()[1]
        serve = start(db_url, tmp_path, "serve", "--port", str(busy))
        status = exit_status(serve, tmp_path)
    output = (tmp_path / "serve.log").read_text()
    assert status == 1, output
    assert output.splitlines() == [
        f"Error: the console port {busy} on 127.0.0.1 is already in use: "
        "stop what listens there or pass another --port"
    ]
    assert serve.pid not in heartbeats(db_url), "no worker was started"
