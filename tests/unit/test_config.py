"""CONSOLE_* settings: defaults that work, and clear errors naming the variable."""

import pytest

from console.config import ConfigError, load_enqueue_settings, load_settings

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
    ("CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS", "pipelining, turbo"),
    ("CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS", "starttls"),
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
        {"CONSOLE_DATABASE_URL": "postgresql://u@h/db", "CONSOLE_SECRET_KEY": "s" * 32},
        instance_path=instance,
    )
    assert settings.database_url == "postgresql+psycopg://u@h/db"
    assert not instance.exists()


def test_create_app_fails_at_start_up_on_a_bad_setting(tmp_path):
    from console.app import create_app

    with pytest.raises(ConfigError, match="CONSOLE_LEASE_SECONDS"):
        create_app({"CONSOLE_LEASE_SECONDS": "soon", "CONSOLE_DATABASE_URL": "sqlite://"})


def test_email_templates_must_be_an_existing_directory(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ConfigError, match="CONSOLE_EMAIL_TEMPLATES") as error:
        load_settings({"CONSOLE_EMAIL_TEMPLATES": str(missing)}, instance_path=tmp_path)
    assert "does not exist" in str(error.value)
    a_file = tmp_path / "templates.txt"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="CONSOLE_EMAIL_TEMPLATES.*not a directory"):
        load_settings({"CONSOLE_EMAIL_TEMPLATES": str(a_file)}, instance_path=tmp_path)
    settings = load_settings({"CONSOLE_EMAIL_TEMPLATES": str(tmp_path)}, instance_path=tmp_path)
    assert settings.email_templates_dir == tmp_path.resolve()
    assert load_settings({}, instance_path=tmp_path).email_templates_dir is None


def test_overrides_take_precedence_over_the_environment(tmp_path):
    settings = load_settings(
        {"CONSOLE_BATCH_SIZE": "7", "CONSOLE_POLL_SECONDS": "2"},
        instance_path=tmp_path,
        overrides={"CONSOLE_BATCH_SIZE": "9"},
    )
    assert (settings.batch_size, settings.poll_seconds) == (9, 2.0)


def test_enqueue_settings_create_nothing_and_check_the_same_way(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_enqueue_settings({"CONSOLE_MESSAGE_ID_DOMAIN": "mail.shop.example"})
    assert settings.message_id_domain == "mail.shop.example"
    assert (settings.database_url, settings.secret_key) == ("", "")
    assert list(tmp_path.iterdir()) == [], "no instance folder, no secret key file"
    with pytest.raises(ConfigError, match="CONSOLE_MAX_PARAMS_BYTES"):
        load_enqueue_settings({"CONSOLE_MAX_PARAMS_BYTES": "lots"})


def test_log_level_and_test_switches_are_settings(tmp_path):
    settings = load_settings(
        {"CONSOLE_LOG_LEVEL": "warning", "CONSOLE_TEST_CRASH_AT": "envelope"},
        instance_path=tmp_path,
    )
    assert (settings.log_level, settings.test_crash_at) == ("WARNING", "envelope")
    with pytest.raises(ConfigError, match="CONSOLE_LOG_LEVEL"):
        load_settings({"CONSOLE_LOG_LEVEL": "chatty"}, instance_path=tmp_path)


def test_ehlo_keywords_to_discard_are_read_in_any_case_and_separated_by_commas_or_spaces(
    tmp_path,
):
    default = load_settings({}, instance_path=tmp_path)
    assert default.smtp_discard_ehlo_keywords == frozenset()
    settings = load_settings(
        {"CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS": " PIPELINING,chunking  size "},
        instance_path=tmp_path,
    )
    assert settings.smtp_discard_ehlo_keywords == {"pipelining", "chunking", "size"}


def test_the_smtp_transport_is_given_the_keywords_to_discard(tmp_path):
    from console.transports.factory import make_transport

    environ = {"CONSOLE_SMTP_DISCARD_EHLO_KEYWORDS": "chunking"}
    transport = make_transport(load_settings(environ, instance_path=tmp_path))
    assert transport.discard_ehlo_keywords == {"chunking"}
