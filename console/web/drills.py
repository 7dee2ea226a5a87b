"""The drills' recorded reports (``console drill --record``): the dashboard's "Last drill"
line and each run's report page, for every role (a report holds no mail content)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from flask import Blueprint, Flask, abort, render_template, url_for
from sqlalchemy.orm import Session

from console.core.plurals import plural
from console.models import utcnow
from console.store.drill_runs import last_run, run_by_id
from console.vocabulary import VIEWER
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("drills", __name__, url_prefix="/drills")


def ago(seconds: float) -> str:
    """Say how long ago, the way people read it: "just now", "5 minutes ago", "3 days ago"."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            return f"{plural(seconds // size, unit)} ago"
    raise AssertionError("unreachable")


@dataclasses.dataclass(frozen=True)
class DrillLine:
    text: str
    link: str
    held: bool


def last_drill_line(session: Session, now: dt.datetime) -> DrillLine | None:
    """The dashboard's line about the last recorded drill; None when none was recorded."""
    run = last_run(session)
    if run is None:
        return None
    when = ago((now - run.ran_at).total_seconds())
    text = f"Last drill: {when} — {run.held} of {run.total} held"
    return DrillLine(text, url_for("drills.report", run_id=run.id), run.held == run.total)


@bp.get("/<int:run_id>")
@role_required(VIEWER)
def report(run_id: int):
    run = run_by_id(db.session, run_id)
    if run is None:
        abort(404)
    return render_template(
        "drills/report.html", run=run, ago=ago((utcnow() - run.ran_at).total_seconds())
    )


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
