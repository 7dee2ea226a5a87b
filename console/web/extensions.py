"""Flask extensions, created unbound and initialised in create_app()."""

from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

import console.models  # noqa: F401 - registers every table on Base.metadata
from console.model_columns import Base

db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()


def current_settings():  # -> console.config.Settings
    """Return the Settings of the running Flask app."""
    from flask import current_app

    return current_app.extensions["console.settings"]
