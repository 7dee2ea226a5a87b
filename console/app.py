"""The Flask application: settings, extensions, blueprints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, request
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from console import logs, outbox, web
from console.config import load_settings
from console.paths import MIGRATIONS_DIR, STATIC_DIR, TEMPLATES_DIR, instance_dir
from console.store import database
from console.web import busy, input_guards
from console.web.extensions import db, login_manager, migrate

__all__ = ["create_app"]


class _SessionCookies(SecureCookieSessionInterface):
    """Mark the session cookie Secure when configured, or when this request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


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
        SQLALCHEMY_ENGINE_OPTIONS=database.engine_options(
            settings.database_url, lock_timeout_seconds=settings.db_lock_timeout_seconds
        ),
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

    app.session_interface = _SessionCookies()
    if settings.trusted_proxies:  # the scheme then follows X-Forwarded-Proto: https
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)  # type: ignore[method-assign]
    database.create_private_sqlite_file(settings.database_url)
    db.init_app(app)
    with app.app_context():
        database.bound_lock_waits(db.engine, settings.db_lock_timeout_seconds)
    migrate.init_app(app, db, directory=str(MIGRATIONS_DIR), render_as_batch=True)
    login_manager.init_app(app)
    input_guards.install_converters(app)
    input_guards.init_app(app)
    web.init_app(app)
    busy.init_app(app)
    return app
