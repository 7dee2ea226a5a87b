"""The SQLite database and the secret key are the owner's alone, from their first byte."""

from __future__ import annotations

import os
import stat

import pytest
from sqlalchemy import text

from console.app import create_app
from console.config import ConfigError, load_settings
from console.store.database import make_engine
from console.web.extensions import db


@pytest.fixture
def open_umask():
    """A umask that lets everyone read new files, as on many hosts."""
    saved = os.umask(0o022)
    yield
    os.umask(saved)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_default_database_and_key_are_created_0600(tmp_path, monkeypatch, open_umask):
    instance = tmp_path / "instance"
    monkeypatch.setattr("console.app.instance_dir", lambda: instance)
    for name in [n for n in os.environ if n.startswith("CONSOLE_")]:
        monkeypatch.delenv(name)
    app = create_app()
    with app.app_context():
        db.session.execute(text("CREATE TABLE probe (x INTEGER)"))
        db.session.commit()
        db.engine.dispose()
    assert mode_of(instance / "secret_key") == 0o600
    assert mode_of(instance / "console.db") == 0o600
    for journal in ("console.db-wal", "console.db-shm"):
        if (instance / journal).exists():
            assert mode_of(instance / journal) & 0o077 == 0, journal


def test_a_configured_sqlite_file_is_created_0600(tmp_path, open_umask):
    path = tmp_path / "elsewhere.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE probe (x INTEGER)"))
    engine.dispose()
    assert mode_of(path) == 0o600


def test_the_key_file_is_never_readable_by_others_even_briefly(tmp_path, monkeypatch):
    """The key is written into a file opened 0600, not chmod-ed after the write."""
    opened = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *args, **kwargs):
        opened.append((os.fspath(path), mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    load_settings({}, instance_path=tmp_path)
    assert opened and all(mode == 0o600 for _, mode in opened)


def test_a_key_file_readable_by_others_stops_start_up_with_the_fix(tmp_path):
    load_settings({}, instance_path=tmp_path)
    key_file = tmp_path / "secret_key"
    key_file.chmod(0o644)
    with pytest.raises(ConfigError) as error:
        load_settings({}, instance_path=tmp_path)
    assert "chmod 600" in str(error.value) and str(key_file) in str(error.value)
    key_file.chmod(0o600)
    assert load_settings({}, instance_path=tmp_path).secret_key


@pytest.mark.parametrize("key", ["Q", "short-but-not-32-characters"])
def test_a_short_secret_key_stops_start_up_with_the_fix(tmp_path, key):
    with pytest.raises(ConfigError, match="CONSOLE_SECRET_KEY must be at least 32") as error:
        load_settings({"CONSOLE_SECRET_KEY": key}, instance_path=tmp_path)
    assert "secrets.token_hex(32)" in str(error.value)
    assert key not in str(error.value)
    assert load_settings({"CONSOLE_SECRET_KEY": "k" * 32}, instance_path=tmp_path).secret_key
