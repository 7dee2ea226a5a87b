"""Real `console worker` processes to kill and restart on a fresh database; the rows they leave."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import time

from sqlalchemy import select

from console.models import Attempt, Intent
from console.outbox import enqueue
from console.store.database import make_engine, make_session_factory
from tests.support import pgcluster
from tests.support.commands import CONSOLE_BIN

ORDER = dict(
    template="order-confirmation",
    params={"customer_name": "Ada", "order_number": "A-1", "items": [], "total": "0.00"},
)
INTENTS_PER_SCENARIO = 3
SETTLE_TIMEOUT_SECONDS = 60
_database_numbers = itertools.count(1)


def new_database(backend: str, request, tmp_path) -> str:
    number = next(_database_numbers)
    if backend == "sqlite":
        target = tmp_path / f"crash{number}.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    cluster = request.getfixturevalue("pg_cluster")
    name = f"crash_{os.getpid()}_{number}"
    return pgcluster.create_test_database(cluster, request, name)


def worker_environment(db_url: str, smtp_url: str, **extra: str) -> dict[str, str]:
    """A ``console worker``'s variables: one SMTP connection (each send's stage is then
    the only one in flight) and short timings, unless `extra` says otherwise."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    return {
        **environ,
        "CONSOLE_DATABASE_URL": db_url,
        "CONSOLE_SECRET_KEY": "test" * 8,
        "CONSOLE_SMTP_URL": smtp_url,
        "CONSOLE_LEASE_SECONDS": "1",
        "CONSOLE_POLL_SECONDS": "0.2",
        "CONSOLE_RETRY_BASE_SECONDS": "0.2",
        "CONSOLE_RETRY_FLOOR_SECONDS": "0",
        "CONSOLE_SMTP_TIMEOUT_SECONDS": "30",
        "CONSOLE_SMTP_CONNECTIONS": "1",
        "CONSOLE_BATCH_SIZE": "10",
        "CONSOLE_LOG_LEVEL": "WARNING",
        **extra,
    }


def start_worker(environ: dict[str, str], log_path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [CONSOLE_BIN, "worker"],
            env=environ,
            cwd=log_path.parent,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def intent_rows(db_url: str) -> list[Intent]:
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            return session.scalars(select(Intent).order_by(Intent.id)).all()
    finally:
        engine.dispose()


def attempt_outcomes(db_url: str, intent_id: int, column=Attempt.outcome) -> list[str | None]:
    """The intent's attempts' `column`, oldest first (default: their outcomes)."""
    engine = make_engine(db_url)
    try:
        with make_session_factory(engine)() as session:
            query = select(column).where(Attempt.intent_id == intent_id)
            return list(session.scalars(query.order_by(Attempt.id)))
    finally:
        engine.dispose()


def enqueue_scenario(db_url: str, scenario_number: int, spec: dict) -> list[str]:
    engine = make_engine(db_url)
    recipients = [f"s{scenario_number}-{n}@example.com" for n in range(INTENTS_PER_SCENARIO)]
    try:
        with make_session_factory(engine)() as session:
            for n, recipient in enumerate(recipients):
                enqueue(session, key=f"crash:{scenario_number}:{n}", to=recipient, **spec)
                session.commit()
    finally:
        engine.dispose()
    return recipients


def wait_for(condition, timeout_seconds: float, what: str) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
