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


def test_user_set_password_changes_it_ends_sessions_and_is_audited(sqlite_url, tmp_path):
    from console.models import AuditEntry

    create = ["user", "create", "ada", "--role", "viewer", "--password-stdin"]
    assert run_console(create, sqlite_url, tmp_path, stdin="first password\n").returncode == 0
    engine = create_engine(sqlite_url)
    with Session(engine) as session:
        before = session.execute(select(OperatorUser)).scalar_one().session_generation
    changed = run_console(
        ["user", "set-password", "ada", "--password-stdin"],
        sqlite_url,
        tmp_path,
        stdin="second password\n",
    )
    assert changed.returncode == 0, changed.stderr
    assert "second password" not in changed.stdout + changed.stderr
    with Session(engine) as session:
        user = session.execute(select(OperatorUser)).scalar_one()
        audit = session.execute(select(AuditEntry.action, AuditEntry.target)).all()
    assert verify_password(user, "second password") and not verify_password(user, "first password")
    assert user.session_generation == before + 1
    assert ("user_password_set", "ada") in audit
    short = ["user", "set-password", "ada", "--password-stdin"]
    refused = run_console(short, sqlite_url, tmp_path, stdin="short\n")
    assert refused.returncode != 0 and "at least" in refused.stderr
    missing = run_console(["user", "set-password", "bob", "--password-stdin"], sqlite_url, tmp_path)
    assert missing.returncode != 0 and "no user 'bob'" in missing.stderr
    engine.dispose()


def test_user_list_shows_name_role_state_and_last_login(sqlite_url, tmp_path):
    for name, role in (("ada", "admin"), ("bob", "viewer")):
        args = ["user", "create", name, "--role", role, "--password-stdin"]
        assert run_console(args, sqlite_url, tmp_path, stdin="long enough pw\n").returncode == 0
    listed = run_console(["user", "list"], sqlite_url, tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["username", "role", "state", "last", "login", "(UTC)"]
    assert lines[1].split() == ["ada", "admin", "active", "never"]
    assert lines[2].split() == ["bob", "viewer", "active", "never"]


def test_a_bad_setting_stops_worker_and_prune_with_one_line_naming_it(sqlite_url, tmp_path):
    for command in (["worker"], ["prune"]):
        env = {**os.environ, "CONSOLE_DATABASE_URL": sqlite_url, "CONSOLE_BATCH_SIZE": "abc"}
        result = subprocess.run(
            [CONSOLE, *command], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 1, command
        assert "CONSOLE_BATCH_SIZE must be a whole number" in result.stderr
        assert "Traceback" not in result.stderr, result.stderr


def imported_by(probe: str) -> str:
    """What `probe` (Python statements run by the installed interpreter) prints."""
    python = os.path.join(os.path.dirname(CONSOLE), "python")
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_worker_starts_without_building_the_web_app():
    """`console worker` imports neither Flask, nor the app factory, nor the blueprints."""
    probe = (
        "import sys, console.entry, console.commands.worker;"
        "print(sorted(m for m in sys.modules if m in ('flask', 'console.app', 'console.cli')"
        " or m.startswith('console.web')))"
    )
    assert imported_by(probe) == "[]"


def test_the_worker_on_sqlite_starts_without_psycopg_or_httpx():
    """`console worker` on SQLite with an SMTP relay, its services (the wake-up listener,
    the ops jobs, /metrics) loaded too, imports neither PostgreSQL's driver nor the HTTP
    client: neither is needed until a PostgreSQL database or an alert webhook is."""
    probe = (
        "import sys, console.entry, console.commands.worker;"
        "from console.engine import pg_wakeup;"
        "import console.ops.jobs.schedule, console.ops.metrics.prometheus;"
        "assert pg_wakeup.listener_for('sqlite:///unused.sqlite') is None;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'httpx')))"
    )
    assert imported_by(probe) == "[]"
