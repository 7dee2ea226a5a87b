"""Database URLs: the forms hosting platforms hand out are PostgreSQL on the psycopg driver."""

from __future__ import annotations

import pytest

from console.config import ConfigError, load_settings
from console.store.database import normalized_database_url


@pytest.mark.parametrize(
    "given, used",
    [
        ("postgres://u:p@db.example:5432/app", "postgresql+psycopg://u:p@db.example:5432/app"),
        ("postgresql://u@db.example/app?sslmode=require",
         "postgresql+psycopg://u@db.example/app?sslmode=require"),
        ("postgres+psycopg://u@h/app", "postgresql+psycopg://u@h/app"),
        ("postgresql+psycopg://u@h/app", "postgresql+psycopg://u@h/app"),
        ("sqlite:////var/lib/console.db", "sqlite:////var/lib/console.db"),
        ("sqlite://", "sqlite://"),
    ],
)  # fmt: skip
def test_postgres_urls_take_the_psycopg_driver(given, used, tmp_path):
    assert normalized_database_url(given) == used
    settings = load_settings(
        instance_path=tmp_path,
        overrides={"CONSOLE_DATABASE_URL": given, "CONSOLE_SECRET_KEY": "s" * 32},
    )
    assert settings.database_url == used


@pytest.mark.parametrize("given", ["mysql://u@h/app", "postgresx://u@h/app", "db.example/app"])
def test_other_schemes_are_refused_naming_the_variable(given, tmp_path):
    with pytest.raises(ConfigError, match="CONSOLE_DATABASE_URL"):
        load_settings(
            instance_path=tmp_path,
            overrides={"CONSOLE_DATABASE_URL": given, "CONSOLE_SECRET_KEY": "s" * 32},
        )
