"""Real ``console`` processes on one database: their environment, start, stop and waits."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.models import Intent
from console.state_tables import WorkerHeartbeat
from console.vocabulary import SUBMITTED
from tests.support.commands import CONSOLE_BIN


def console_environment(database_url: str, smtp_url: str, **settings: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    return {
        **environ,
        "CONSOLE_DATABASE_URL": database_url,
        "CONSOLE_SECRET_KEY": "scale-test" * 4,
        "CONSOLE_SMTP_URL": smtp_url,
        "CONSOLE_LOG_LEVEL": "WARNING",
        **settings,
    }


@dataclasses.dataclass
class ConsoleProcess:
    """One ``console serve`` or ``console worker`` child process."""

    args: list[str]
    env: dict[str, str]
    workdir: Path
    process: subprocess.Popen | None = None
    log_path: Path | None = None

    def start(self) -> ConsoleProcess:
        name = "-".join(self.args) + f"-{time.monotonic_ns()}"
        self.log_path = self.workdir / f"{name}.log"
        with open(self.log_path, "w") as log_file:
            self.process = subprocess.Popen(
                [CONSOLE_BIN, *self.args],
                env=self.env,
                cwd=self.workdir,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout_seconds: float = 30) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def worker_process(env: dict[str, str], workdir: Path) -> ConsoleProcess:
    return ConsoleProcess(["worker"], env, workdir)


def wait_for_workers(engine, count: int, deadline: float, workers) -> None:
    """Until `count` workers have written a heartbeat (each has ticked once, idle)."""
    while True:
        with Session(engine) as session:
            beating = session.execute(select(func.count()).select_from(WorkerHeartbeat))
            if beating.scalar_one() >= count:
                return
        assert all(w.process.poll() is None for w in workers), "a worker died"
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)


def submitted(engine) -> int:
    with Session(engine) as session:
        query = select(func.count()).where(Intent.status == SUBMITTED)
        return session.execute(query).scalar_one()
