"""The console command: db upgrade and user create, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess

from sqlalchemy import create_engine, inspect, select
from sqlalchemy.orm import Session

from console.models import OperatorUser
from console.store.accounts import verify_password
from tests.support.commands import CONSOLE_BIN

CONSOLE = CONSOLE_BIN


def run_console(args, url, tmp_path, stdin=""):
    env = {**os.environ, "CONSOLE_DATABASE_URL": url, "CONSOLE_SECRET_KEY": "k" * 32}
    return subprocess.run(
        [CONSOLE, *args],
        input=stdin,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_db_upgrade_from_any_directory_creates_the_schema(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = run_console(["db", "upgrade"], url, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "email_intent" in inspect(create_engine(url)).get_table_names()
    assert not (tmp_path / "instance").exists()


def test_user_create_hashes_the_password(db_url, tmp_path):
    result = run_console(
        ["user", "create", "ada", "--role", "operator", "--password-stdin"],
        db_url,
        tmp_path,
        stdin="correct horse battery\n",
    )
    assert result.returncode == 0, result.stderr
    assert "correct horse" not in result.stdout + result.stderr
    with Session(create_engine(db_url)) as session:
        user = session.execute(select(OperatorUser)).scalar_one()
    assert user.role == "operator"
    assert user.password_hash.startswith("scrypt:")
    assert "correct horse" not in user.password_hash
    assert verify_password(user, "correct horse battery")


def test_user_create_refuses_a_duplicate_and_a_short_password(sqlite_url, tmp_path):
    args = ["user", "create", "ada", "--role", "viewer", "--password-stdin"]
    assert run_console(args, sqlite_url, tmp_path, stdin="long enough pw\n").returncode == 0
    duplicate = run_console(args, sqlite_url, tmp_path, stdin="long enough pw\n")
    assert duplicate.returncode != 0 and "already exists" in duplicate.stderr
    short = run_console(
        ["user", "create", "bob", "--role", "viewer", "--password-stdin"],
        sqlite_url,
        tmp_path,
        stdin="short\n",
    )
    assert short.returncode != 0 and "at least" in short.stderr
