"""A throwaway PostgreSQL cluster on 127.0.0.1 for tests and benchmarks.

initdb and pg_ctl refuse to run as root, so as root they run as ``postgres``.
A test's database is dropped once the test after it starts (``Cluster.finished``,
``Cluster.drop_finished``), in a thread: the cluster's disk stays that of a few
databases instead of one per test (several GB over the suite), and no test waits.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time

log = logging.getLogger(__name__)


def postgres_bin_dir() -> str | None:
    """Return the newest PostgreSQL server bin directory, or None when not installed."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    for candidate in reversed(candidates):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{part}'" for part in command)]


class DatabaseDropper:
    """Drops databases, one after another, on a connection of its own in a thread."""

    def __init__(self, port: int) -> None:
        self._names: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        self._thread = threading.Thread(target=self._run, name="drop-databases", daemon=True)
        self._thread.start()

    def drop(self, name: str) -> None:
        self._names.put(name)

    def close(self) -> None:
        """Stop after the drop in progress; what is left goes with the cluster's folder."""
        while not self._names.empty():
            self._names.get_nowait()
        self._names.put(None)
        self._thread.join(60)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self._dsn, autocommit=True) as connection:
            while (name := self._names.get()) is not None:
                try:  # FORCE: a connection a test left open does not keep it
                    connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except psycopg.Error as error:
                    log.warning("could not drop test database %s: %s", name, error)


@dataclasses.dataclass
class Cluster:
    bin_dir: str
    data_dir: str
    port: int
    _finished: list[str] = dataclasses.field(default_factory=list)
    _dropper: DatabaseDropper | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def finished(self, name: str) -> None:
        """Database `name` is no longer used once its test's teardown is over."""
        self._finished.append(name)

    def drop_finished(self) -> None:
        """Drop the databases of the tests before this one (their teardowns are over)."""
        if not self._finished:
            return
        if self._dropper is None:
            self._dropper = DatabaseDropper(self.port)
        for name in self._finished:
            self._dropper.drop(name)
        self._finished.clear()

    def stop(self) -> None:
        if self._dropper is not None:
            self._dropper.close()
        subprocess.run(
            _as_postgres(
                [f"{self.bin_dir}/pg_ctl", "-D", self.data_dir, "-m", "immediate", "-w", "stop"]
            ),
            cwd="/tmp",
            capture_output=True,
        )
        shutil.rmtree(os.path.dirname(self.data_dir), ignore_errors=True)


def start_cluster(
    max_connections: int = 200, *, durable: bool = False, settings: dict[str, str] | None = None
) -> Cluster:
    """Create and start a fresh cluster; the caller must stop() it. Tests turn fsync and
    synchronous commits off; `durable` keeps PostgreSQL's defaults (benchmarks); `settings`
    are more server settings (name to value, e.g. a library to preload)."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
    base = tempfile.mkdtemp(prefix="pg.", dir="/tmp")
    data_dir = os.path.join(base, "data")
    os.chmod(base, 0o755)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres(
            [
                f"{bin_dir}/initdb",
                "-D",
                data_dir,
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ]
        ),
        cwd="/tmp",
        check=True,
        capture_output=True,
    )
    options = (
        f"-k {base} -p {port} -c listen_addresses=127.0.0.1 -c max_connections={max_connections}"
    )
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    options += "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    subprocess.run(
        _as_postgres(
            [
                f"{bin_dir}/pg_ctl",
                "-D",
                data_dir,
                "-o",
                options,
                "-w",
                "-l",
                os.path.join(base, "log"),
                "start",
            ]
        ),
        cwd="/tmp",
        check=True,
        capture_output=True,
    )
    cluster = Cluster(bin_dir, data_dir, port)
    _wait_ready(cluster)
    return cluster


def _wait_ready(cluster: Cluster, timeout_seconds: float = 20.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            psycopg.connect(
                f"host=127.0.0.1 port={cluster.port} user=postgres dbname=postgres"
            ).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def create_database(cluster: Cluster, name: str, template: str | None = None) -> str:
    """Create database `name` (optionally copied from `template`) and return its URL."""
    import psycopg

    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as connection:
        suffix = f" TEMPLATE {template}" if template else ""
        connection.execute(f'CREATE DATABASE "{name}"{suffix}')
    return cluster.url(name)


def create_test_database(cluster: Cluster, request, name: str) -> str:
    """A copy of the migrated template for the test of `request`, dropped after it."""
    cluster.drop_finished()
    url = create_database(cluster, name, template="migrated_template")
    request.addfinalizer(lambda: cluster.finished(name))
    return url


if __name__ == "__main__":  # a cluster for trying things by hand
    started = start_cluster()
    print(started.url(), flush=True)
    print(f"stop with: kill this process; data in {started.data_dir}", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        started.stop()
