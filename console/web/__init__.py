"""The console's web blueprints, one per feature."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register every blueprint of the console on `app`."""
