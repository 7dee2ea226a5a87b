"""CONSOLE_* settings: defaults that work, and clear errors naming the variable."""

import pytest

from console.config import ConfigError, load_settings

BAD = [
    ("CONSOLE_BATCH_SIZE", "many"),
    ("CONSOLE_BATCH_SIZE", "0"),
    ("CONSOLE_POLL_SECONDS", "-1"),
    ("CONSOLE_SMTP_URL", "http://relay.example.com"),
    ("CONSOLE_SMTP_URL", "smtp://"),
    ("CONSOLE_DATABASE_URL", "mysql://x/y"),
    ("CONSOLE_MESSAGE_ID_DOMAIN", "not a domain"),
    ("CONSOLE_MAIL_FROM", "nobody"),
    ("CONSOLE_COOKIE_SECURE", "maybe"),
    ("CONSOLE_MAX_ATTEMPTS", "1.5"),
]


@pytest.mark.parametrize("variable,value", BAD)
def test_invalid_setting_names_the_variable(tmp_path, variable, value):
    with pytest.raises(ConfigError, match=variable):
        load_settings({variable: value}, instance_path=tmp_path)


def test_defaults_use_sqlite_and_a_persisted_secret_in_the_instance_folder(tmp_path):
    instance = tmp_path / "instance"
    first = load_settings({}, instance_path=instance)
    second = load_settings({}, instance_path=instance)
    assert first.database_url == f"sqlite:///{instance / 'console.db'}"
    assert first.secret_key == second.secret_key
    assert (instance / "secret_key").stat().st_mode & 0o077 == 0


def test_explicit_database_does_not_create_the_instance_folder(tmp_path):
    instance = tmp_path / "instance"
    settings = load_settings(
        {"CONSOLE_DATABASE_URL": "postgresql://u@h/db", "CONSOLE_SECRET_KEY": "s"},
        instance_path=instance,
    )
    assert settings.database_url == "postgresql+psycopg://u@h/db"
    assert not instance.exists()


def test_create_app_fails_at_start_up_on_a_bad_setting(tmp_path):
    from console.app import create_app

    with pytest.raises(ConfigError, match="CONSOLE_LEASE_SECONDS"):
        create_app({"CONSOLE_LEASE_SECONDS": "soon", "CONSOLE_DATABASE_URL": "sqlite://"})
