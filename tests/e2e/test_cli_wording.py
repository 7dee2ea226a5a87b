"""The CLI's own sentences: no talk of sessions where none is signed, errors punctuated."""

from __future__ import annotations

import logging
import os
import subprocess

from console import paths
from tests.support.commands import CONSOLE_BIN
from tests.support.pgcluster import free_port


def run_without_key(args, url, tmp_path):
    env = {**os.environ, "CONSOLE_DATABASE_URL": url}
    env.pop("CONSOLE_SECRET_KEY", None)
    return subprocess.run(
        [CONSOLE_BIN, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_db_upgrade_says_nothing_of_sessions(tmp_path):
    result = run_without_key(["db", "upgrade"], f"sqlite:///{tmp_path / 'fresh.db'}", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "session" not in (result.stdout + result.stderr).lower(), result.stderr
    assert "upgraded the database" in result.stdout


def test_an_unreachable_postgresql_is_said_in_punctuated_sentences(tmp_path):
    url = f"postgresql://console:secret@127.0.0.1:{free_port()}/console"
    result = run_without_key(["db", "upgrade"], url, tmp_path)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert "Connection refused. Is the server running" in line, line


def test_only_a_key_made_for_this_process_is_warned_about(caplog):
    caplog.set_level(logging.WARNING, logger="console.paths")
    paths.warn_if_process_key("k" * 32)
    assert caplog.records == []
    paths.warn_if_process_key(paths.default_secret(None))
    (record,) = caplog.records
    assert "sessions will not survive a restart" in record.getMessage()
