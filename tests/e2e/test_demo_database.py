"""`console demo` never writes into a database it did not make, on SQLite and PostgreSQL.

Pointed (CONSOLE_DATABASE_URL or ``--database``) at an application's database,
one that holds the application's mail or accounts, it refuses in one line with
exit status 2 and changes nothing there; an empty one it takes as its own.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.orm import Session
from werkzeug.security import generate_password_hash

from console.models import OperatorUser, utcnow
from console.outbox import enqueue
from tests.support.commands import CONSOLE_BIN
from tests.support.demo_process import DemoProcess
from tests.support.pgcluster import free_port


def store_the_applications_rows(url: str, *, user: bool = True, intent: bool = True) -> None:
    engine = create_engine(url)
    with Session(engine) as session:
        if intent:
            enqueue(session, key="order:77:confirmation", to="buyer@shop.example",
                    template="login-code", params={"code": "424242"})  # fmt: skip
        if user:
            password_hash = generate_password_hash("the app's own")
            session.add(OperatorUser(username="operator", role="admin", created_at=utcnow(),
                                     password_hash=password_hash))  # fmt: skip
        session.commit()
    engine.dispose()


def snapshot(url: str) -> dict[str, object]:
    """Every table's row count, and the accounts with their password hashes."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            counts = {
                table: connection.execute(text(f'SELECT count(*) FROM "{table}"')).scalar()
                for table in inspect(connection).get_table_names()
            }
            users = connection.execute(
                select(OperatorUser.username, OperatorUser.role, OperatorUser.password_hash)
            ).all()
        return {"counts": counts, "users": sorted(users)}
    finally:
        engine.dispose()


def run_demo(url: str, tmp_path, *, option: bool) -> subprocess.CompletedProcess:
    environment = {**os.environ, "CONSOLE_DATABASE_URL": url}
    environment.pop("CONSOLE_SMTP_URL", None)
    if option:
        environment.pop("CONSOLE_DATABASE_URL")
    command = [CONSOLE_BIN, "demo", "--port", str(free_port()), "--smtp-port", str(free_port())]
    return subprocess.run(
        command + (["--database", url] if option else []),
        env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@pytest.mark.parametrize(
    "holds", [{"user": True, "intent": True}, {"user": True, "intent": False},
              {"user": False, "intent": True}],
    ids=["user-and-intent", "user", "intent"],
)  # fmt: skip
def test_the_demo_refuses_an_applications_database_and_changes_nothing(db_url, tmp_path, holds):
    store_the_applications_rows(db_url, **holds)
    before = snapshot(db_url)
    assert_refused(run_demo(db_url, tmp_path, option=False))
    assert snapshot(db_url) == before


def test_the_demo_refuses_it_given_as_its_database_option(db_url, tmp_path):
    store_the_applications_rows(db_url)
    before = snapshot(db_url)
    assert_refused(run_demo(db_url, tmp_path, option=True))
    assert snapshot(db_url) == before


def test_the_demo_refuses_an_applications_database_behind_the_code_without_upgrading_it(
    tmp_path,
):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    environment = {**os.environ, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "k" * 32}
    upgrade = subprocess.run(
        [CONSOLE_BIN, "db", "upgrade", "0001"], env=environment, cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert upgrade.returncode == 0, upgrade.stderr
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO operator_user (username, password_hash, role, created_at) "
                 "VALUES ('ops', 'x', 'admin', CURRENT_TIMESTAMP)")
        )  # fmt: skip
    engine.dispose()
    before = snapshot(url)
    assert_refused(run_demo(url, tmp_path, option=False))
    assert snapshot(url) == before
    engine = create_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == (
            "0001"
        )
    engine.dispose()


def assert_refused(result: subprocess.CompletedProcess) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert result.stdout == "" and "Traceback" not in output, output
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: the database at ") and "did not create" in line
    assert "log in" not in output, "no passwords printed"


@pytest.mark.slow
def test_the_demo_takes_an_empty_database_and_uses_it_again(postgres_url):
    for _ in range(2):  # the second run finds its own mark
        demo = DemoProcess(postgres_url)
        try:
            demo.wait_for(r"log in\s+operator / (\S+)")
            demo.wait_for(rf"console on http://127.0.0.1:{demo.port}")
        finally:
            assert demo.stop() == 0, "\n".join(demo.lines)
    assert snapshot(postgres_url)["counts"]["email_intent"] > 0
