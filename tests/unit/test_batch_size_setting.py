"""CONSOLE_BATCH_SIZE: unset, a claim takes 50 intents for each SMTP connection (every
connection count then sends a batch in about the time one connection sends 50, so a
critical intent waits about as long behind it); set, exactly that many."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings
from console.worker.decisions import WorkerSettings

BASE = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 64}


def claim_size(tmp_path, **environ: str) -> int:
    settings = load_settings({**BASE, **environ}, instance_path=tmp_path)
    return WorkerSettings.from_settings(settings).batch_size


def test_unset_it_is_50_for_each_connection(tmp_path):
    assert claim_size(tmp_path) == 200, "four connections by default"
    assert claim_size(tmp_path, CONSOLE_SMTP_CONNECTIONS="1") == 50
    assert claim_size(tmp_path, CONSOLE_SMTP_CONNECTIONS="4") == 200


def test_set_it_is_taken_as_it_is_whatever_the_connections(tmp_path):
    assert claim_size(tmp_path, CONSOLE_BATCH_SIZE="50", CONSOLE_SMTP_CONNECTIONS="4") == 50
    assert claim_size(tmp_path, CONSOLE_BATCH_SIZE="7") == 7


@pytest.mark.parametrize("raw", ["0", "-5", "many"])
def test_a_bad_size_is_refused_naming_the_variable(tmp_path, raw):
    with pytest.raises(ConfigError, match="CONSOLE_BATCH_SIZE"):
        load_settings({**BASE, "CONSOLE_BATCH_SIZE": raw}, instance_path=tmp_path)
