"""A template's settings.toml may set its own p99 latency target (latency_target_seconds)."""

from __future__ import annotations

import pytest

from console.mail.template_settings import CatalogError, read_template_settings


def write(tmp_path, text: str):
    path = tmp_path / "settings.toml"
    path.write_text('current_version = 1\nlane = "critical"\n' + text)
    return path


def test_a_template_may_set_its_own_latency_target(tmp_path):
    settings = read_template_settings(write(tmp_path, "latency_target_seconds = 30\n"), "otp")
    assert settings.latency_target_seconds == 30
    assert read_template_settings(write(tmp_path, ""), "otp").latency_target_seconds is None


@pytest.mark.parametrize("value", ["0", "-5", '"soon"'])
def test_a_bad_latency_target_names_the_file(tmp_path, value):
    with pytest.raises(CatalogError, match="latency_target_seconds"):
        read_template_settings(write(tmp_path, f"latency_target_seconds = {value}\n"), "otp")
