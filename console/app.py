"""The Flask application: settings, extensions, blueprints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask

from console import outbox, web
from console.config import load_settings
from console.ops import logs
from console.paths import MIGRATIONS_DIR, STATIC_DIR, TEMPLATES_DIR, instance_dir
from console.store import database
from console.web.extensions import db, login_manager, migrate

__all__ = ["create_app"]


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Create and configure an instance of the console application.

    `config` may hold CONSOLE_* settings (taking precedence over the
    environment) and plain Flask configuration keys.
    """
    app = Flask(
        __name__,
        template_folder=str(TEMPLATES_DIR),
        static_folder=str(STATIC_DIR),
        instance_path=str(instance_dir()),
        instance_relative_config=False,
    )
    overrides = dict(config or {})
    settings = load_settings(
        instance_path=app.instance_path,
        overrides={k: str(v) for k, v in overrides.items() if k.startswith("CONSOLE_")},
    )
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SQLALCHEMY_DATABASE_URI=settings.database_url,
        SQLALCHEMY_ENGINE_OPTIONS=database.engine_options(settings.database_url),
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.cookie_secure,
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SECURE=settings.cookie_secure,
    )
    app.config.update({k: v for k, v in overrides.items() if not k.startswith("CONSOLE_")})
    app.extensions["console.settings"] = settings
    logs.configure_logging(secrets=logs.settings_secrets(settings), level=settings.log_level)
    outbox.configure(settings)  # checks the email templates, logs the application's overrides

    db.init_app(app)
    migrate.init_app(app, db, directory=str(MIGRATIONS_DIR), render_as_batch=True)
    login_manager.init_app(app)
    web.init_app(app)
    return app
