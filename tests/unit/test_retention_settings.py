"""CONSOLE_RETENTION_DELETE_DAYS: 180 days unless set; 0 turns deletion off; never negative."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings

BASE = {"CONSOLE_DATABASE_URL": "sqlite://", "CONSOLE_SECRET_KEY": "k" * 64}


def test_finished_mail_is_deleted_after_180_days_unless_set(tmp_path):
    assert load_settings(BASE, instance_path=tmp_path).retention_delete_days == 180
    values = {**BASE, "CONSOLE_RETENTION_DELETE_DAYS": "0"}
    assert load_settings(values, instance_path=tmp_path).retention_delete_days == 0
    values["CONSOLE_RETENTION_DELETE_DAYS"] = "365.5"
    assert load_settings(values, instance_path=tmp_path).retention_delete_days == 365.5


@pytest.mark.parametrize("raw", ["-1", "soon"])
def test_a_bad_horizon_is_refused_naming_the_variable(tmp_path, raw):
    values = {**BASE, "CONSOLE_RETENTION_DELETE_DAYS": raw}
    with pytest.raises(ConfigError, match="CONSOLE_RETENTION_DELETE_DAYS"):
        load_settings(values, instance_path=tmp_path)
