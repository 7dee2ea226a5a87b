"""CONSOLE_MAX_REQUEST_BYTES: 1 MiB unless set; at least 16 KiB, so the console's forms fit."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings

BASE = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 64}


def request_bytes(tmp_path, **environ: str) -> int:
    return load_settings({**BASE, **environ}, instance_path=tmp_path).max_request_bytes


def test_unset_it_is_one_mebibyte(tmp_path):
    assert request_bytes(tmp_path) == 1024 * 1024


def test_set_it_is_taken_as_it_is(tmp_path):
    assert request_bytes(tmp_path, CONSOLE_MAX_REQUEST_BYTES=" 65536 ") == 65536


@pytest.mark.parametrize("raw", ["0", "-5", "16383", "1e6", "a lot"])
def test_a_bad_value_is_refused_naming_the_variable(tmp_path, raw):
    with pytest.raises(ConfigError, match="CONSOLE_MAX_REQUEST_BYTES"):
        request_bytes(tmp_path, CONSOLE_MAX_REQUEST_BYTES=raw)
