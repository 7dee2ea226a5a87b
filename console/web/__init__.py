"""The console's web blueprints, one per feature."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register every blueprint of the console on `app`."""
    from htmx_flask import Htmx

    from console.web import (
        audit,
        auth,
        dashboard,
        erasure,
        intents,
        request_size,
        security,
        suppressions,
        users,
    )

    request_size.init_app(app)
    Htmx(app)
    from console.web import fragments

    fragments.init_app(app)
    security.init_app(app)
    for feature in (auth, dashboard, intents, suppressions, users, audit, erasure):
        feature.init_app(app)
    from console.web import ops

    app.register_blueprint(ops.bp)
    from console.web import events, webhooks

    app.register_blueprint(webhooks.bp)
    events.init_app(app)
    from console.web import export, templates_page

    export.init_app(app)
    templates_page.init_app(app)
    from console.web import drills, holds

    holds.init_app(app)
    drills.init_app(app)
