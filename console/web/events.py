"""Provider events in the console: the events still waiting for their intent, and one event."""

from __future__ import annotations

from flask import Blueprint, Flask, abort, render_template, request

from console.store import event_pages as event_store
from console.vocabulary import OPERATOR, VIEWER
from console.web.auth import has_role, role_required
from console.web.extensions import db

bp = Blueprint("events", __name__, url_prefix="/events")


@bp.get("/unmatched")
@role_required(VIEWER)
def unmatched():
    """List events whose message is not known yet, newest first."""
    raw_before = request.args.get("before", "")
    before = int(raw_before) if raw_before.isdigit() else None
    page = event_store.unmatched_events_page(db.session, before=before)
    total = event_store.count_unmatched_events(db.session)
    return render_template("events/unmatched.html", page=page, total=total)


@bp.get("/<int:event_id>")
@role_required(VIEWER)
def detail(event_id: int):
    """Show one event, its intent and the suppressions it caused; the raw payload to operators."""
    found = event_store.event_detail(db.session, event_id)
    if found is None:
        abort(404, description=f"There is no provider event {event_id}.")
    return render_template("events/detail.html", detail=found, show_payload=has_role(OPERATOR))


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
