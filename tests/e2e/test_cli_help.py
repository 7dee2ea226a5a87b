"""What `console` says about itself: its commands, options and version; `db upgrade`'s line."""

from __future__ import annotations

import os
import re
import subprocess
from importlib import metadata

import pytest
from sqlalchemy.engine import make_url

from console.store.schema_check import head_revision
from tests.support import pgcluster
from tests.support.commands import CONSOLE_BIN

PRODUCT_COMMANDS = {
    "serve", "worker", "db", "user", "demo", "prune", "forget", "hold", "release", "holds",
    "drill",
}  # fmt: skip
FLASK_INTERNALS = ("-A", "--app", "--env-file", "--debug", "dotenv", "FLASK")


def run_console(*args: str, url: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_")}
    environment["CONSOLE_SECRET_KEY"] = "k" * 32
    if url is not None:
        environment["CONSOLE_DATABASE_URL"] = url
    return subprocess.run(
        [CONSOLE_BIN, *args], env=environment, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def section(help_text: str, title: str) -> dict[str, str]:
    """The entries of one section of a Click help page ("Commands:", "Options:"): name -> help."""
    body = help_text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
    entries: dict[str, str] = {}
    for line in body.splitlines():
        if match := re.match(r"^  (\S.*?)(?:\s{2,}(.*))?$", line):
            entries[match[1]] = match[2] or ""
    return entries


def test_help_lists_only_the_products_commands_each_with_its_help(tmp_path):
    result = run_console("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = section(result.stdout, "Commands")
    assert set(commands) == PRODUCT_COMMANDS
    assert all(commands.values()), commands
    assert set(section(result.stdout, "Options")) == {"--version", "--help"}
    for internal in FLASK_INTERNALS:
        assert internal not in result.stdout, internal
    assert result.stderr == ""


def test_version_prints_the_installed_version(tmp_path):
    result = run_console("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"console {metadata.version('outbox-console')}\n"


def test_db_help_lists_upgrade_only_and_the_others_still_answer(sqlite_url, tmp_path):
    listed = run_console("db", "--help", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert set(section(listed.stdout, "Commands")) == {"upgrade"}
    current = run_console("db", "current", url=sqlite_url, cwd=tmp_path)
    assert current.returncode == 0, current.stderr
    assert head_revision() in current.stdout


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_serve_and_worker_help_name_the_database_and_the_relay_settings(command, tmp_path):
    result = run_console(command, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "CONSOLE_DATABASE_URL" in result.stdout and "CONSOLE_SMTP_URL" in result.stdout


def test_db_upgrade_names_the_database_and_the_revision_without_alembic_lines(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    first = run_console("db", "upgrade", "0001", url=url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr == "", "no INFO lines of alembic"
    assert first.stdout.splitlines() == [
        f"upgraded the database at {url} from no schema to revision 0001"
    ]
    head = run_console("db", "upgrade", url=url, cwd=tmp_path)
    assert head.stderr == "" and head.stdout.splitlines() == [
        f"upgraded the database at {url} from revision 0001 to revision {head_revision()}"
    ]
    again = run_console("db", "upgrade", url=url, cwd=tmp_path)
    assert again.stderr == "" and again.stdout.splitlines() == [
        f"the database at {url} is already at revision {head_revision()}"
    ]


@pytest.mark.postgres
def test_db_upgrade_on_postgresql_hides_the_password(pg_cluster, tmp_path):
    bare = pgcluster.create_database(pg_cluster, f"upgrade_{os.getpid()}")
    with_password = make_url(bare).set(password="s3cret-pw")  # trust: any password passes
    url = with_password.render_as_string(hide_password=False)
    result = run_console("db", "upgrade", url=url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "s3cret-pw" not in result.stdout + result.stderr
    shown = with_password.render_as_string(hide_password=True)
    assert result.stdout.splitlines() == [
        f"upgraded the database at {shown} from no schema to revision {head_revision()}"
    ]
    assert result.stderr == ""


def test_db_upgrade_refuses_an_unknown_revision_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = run_console("db", "upgrade", "9999", url=url, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr
