"""Provider events in the console: the feed of every event, with filters, and one event."""

from __future__ import annotations

from flask import Blueprint, Flask, abort, render_template, request

from console.core.whole_numbers import whole_number
from console.store import event_feed
from console.store.intents import attempt_number
from console.vocabulary import OPERATOR, VIEWER
from console.web import forms
from console.web.auth import has_role, role_required
from console.web.event_filters import (
    EVENT_SOURCES,
    EVENT_TYPES,
    EventFilters,
    InvalidEventFilter,
)
from console.web.extensions import db

bp = Blueprint("events", __name__, url_prefix="/events")


@bp.get("")
@role_required(VIEWER)
def index():
    """List every provider event newest first, filtered by type, source, recipient and match."""
    return _render_feed(request.args)


@bp.get("/unmatched")
@role_required(VIEWER)
def unmatched():
    """The feed filtered to the events whose message is not known yet."""
    return _render_feed({**request.args, "match": event_feed.UNMATCHED})


def _render_feed(args):
    error = None
    try:
        filters = EventFilters.from_args(args)
    except InvalidEventFilter as exc:
        error = forms.refusal_words("Filter not applied", exc)
        filters = EventFilters()
    before = whole_number(args.get("before"))  # not a number: the first page
    page = event_feed.events_page(db.session, filters, before=before)
    context = dict(
        filters=filters,
        page=page,
        error=error,
        first_page=before is None,
        types=_with_current(EVENT_TYPES, filters.type),
        sources=_with_current(EVENT_SOURCES, filters.source),
        match_states=event_feed.MATCH_STATES,
        unmatched_total=None,
    )
    if filters.match == event_feed.UNMATCHED:
        context["unmatched_total"] = event_feed.count_unmatched(db.session)
    if request.htmx and not error:
        return render_template("events/_rows.html", **context)
    return render_template("events/index.html", **context), 400 if error else 200


def _with_current(known: tuple[str, ...], current: str | None) -> tuple[str, ...]:
    """The known names for a filter menu, and the one asked for when it is another."""
    return known if current is None or current in known else (*known, current)


@bp.get("/<int:event_id>")
@role_required(VIEWER)
def detail(event_id: int):
    """Show one event, its intent and the suppressions it caused; the raw payload to operators."""
    found = event_feed.event_detail(db.session, event_id)
    if found is None:
        abort(404, description=f"There is no provider event {event_id}.")
    attempt_id = found.event.attempt_id
    number = attempt_number(db.session, attempt_id) if attempt_id is not None else None
    return render_template(
        "events/detail.html",
        detail=found,
        attempt_number=number,
        show_payload=has_role(OPERATOR),
    )


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
