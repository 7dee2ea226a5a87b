"""Start-up on a database that is not ready: one line on stderr, exit status 2, nothing started.

``console serve``, ``console worker`` and ``console demo`` are run as real
processes on a database without the schema, one behind the code, one that cannot
be reached and one that cannot be opened; each stops by itself within seconds.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest
from sqlalchemy import create_engine, inspect, text

from console.store.schema_check import head_revision
from tests.support.commands import CONSOLE_BIN
from tests.support.pgcluster import create_database, free_port

TIMEOUT_SECONDS = 40
COMMANDS = {
    "serve": ["serve", "--port", "0"],
    "worker": ["worker"],
    "demo": ["demo", "--port", "{port}", "--smtp-port", "{smtp_port}"],
}


def start(command: str, url: str, tmp_path) -> subprocess.CompletedProcess:
    """Run `command` on `url` until it exits by itself (TimeoutExpired fails the test)."""
    ports = {"port": str(free_port()), "smtp_port": str(free_port())}
    args = [part.format(**ports) for part in COMMANDS[command]]
    environment = {**os.environ, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "k" * 32}
    environment.pop("CONSOLE_SMTP_URL", None)
    return subprocess.run(
        [CONSOLE_BIN, *args], env=environment, cwd=tmp_path,
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
    )  # fmt: skip


def the_one_line(result: subprocess.CompletedProcess) -> str:
    """The whole output of a refused start-up: exactly one line, on stderr, exit status 2."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output and result.stdout == "", output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, output
    return lines[0]


def unmigrated_sqlite(tmp_path) -> str:
    """A SQLite file that holds an application's table but none of the console's."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE customer (id INTEGER PRIMARY KEY, email TEXT)")
    return f"sqlite:///{path}"


@pytest.fixture
def unmigrated_url(backend, request, tmp_path) -> str:
    if backend == "sqlite":
        return unmigrated_sqlite(tmp_path)
    cluster = request.getfixturevalue("pg_cluster")
    return create_database(cluster, f"unmigrated_{os.getpid()}_{free_port()}")


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_database_without_the_schema_is_named_in_one_line(command, unmigrated_url, tmp_path):
    before = tables(unmigrated_url)
    line = the_one_line(start(command, unmigrated_url, tmp_path))
    assert line.startswith("Error: the database at ")
    assert f"has no schema, the code needs {head_revision()}" in line
    assert line.endswith('run "console db upgrade"')
    assert tables(unmigrated_url) == before, "nothing was created or upgraded"


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_schema_behind_the_code_names_both_revisions(command, tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    environment = {**os.environ, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "k" * 32}
    upgrade = subprocess.run(
        [CONSOLE_BIN, "db", "upgrade", "0001"], env=environment, cwd=tmp_path,
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
    )  # fmt: skip
    assert upgrade.returncode == 0, upgrade.stderr
    line = the_one_line(start(command, url, tmp_path))
    assert f"is at revision 0001, the code needs {head_revision()}" in line
    assert 'run "console db upgrade"' in line


def test_the_password_stays_out_of_the_line(pg_cluster, tmp_path):
    name = f"unmigrated_{os.getpid()}_{free_port()}"
    url = create_database(pg_cluster, name).replace("postgres@", "postgres:hunter2@")
    line = the_one_line(start("worker", url, tmp_path))
    assert "hunter2" not in line and f"/{name} has no schema" in line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unreachable_postgresql_is_one_line_saying_what_to_do(command, tmp_path):
    url = f"postgresql://console:secret@127.0.0.1:{free_port()}/console"
    line = the_one_line(start(command, url, tmp_path))
    assert line.startswith("Error: cannot connect to the database at postgresql+psycopg://")
    assert "secret" not in line and "Connection refused" in line
    assert "check CONSOLE_DATABASE_URL" in line


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unopenable_sqlite_path_is_one_line(command, tmp_path):
    url = f"sqlite:///{tmp_path / 'no-such-folder' / 'console.db'}"
    line = the_one_line(start(command, url, tmp_path))
    assert line.startswith(f"Error: cannot connect to the database at {url}")
    assert "unable to open database file" in line
    assert not (tmp_path / "no-such-folder").exists()


def test_a_migrated_database_given_as_postgres_url_starts_the_worker(postgres_url, tmp_path):
    """``postgres://`` (the form hosting platforms hand out) is PostgreSQL."""
    url = postgres_url.replace("postgresql+psycopg://", "postgres://")
    environment = {**os.environ, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "k" * 32}
    worker = subprocess.Popen(
        [CONSOLE_BIN, "worker"], env=environment, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        engine = create_engine(postgres_url)
        with engine.connect() as connection:
            seen = _wait_for_heartbeat(connection)
        engine.dispose()
    finally:
        worker.terminate()
        output = worker.communicate(timeout=TIMEOUT_SECONDS)[0]
    assert seen, output
    assert worker.returncode == 0 and "Traceback" not in output, output


def _wait_for_heartbeat(connection, timeout_seconds: float = 20) -> bool:
    import time

    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        count = connection.execute(text("SELECT count(*) FROM worker_heartbeat")).scalar()
        connection.commit()
        if count:
            return True
        time.sleep(0.2)
    return False
