"""The audit log: every operator action, newest first."""

from __future__ import annotations

from flask import Blueprint, Flask, render_template, request

from console.store import audit as audit_store
from console.vocabulary import OPERATOR
from console.web.auth import role_required
from console.web.extensions import db

bp = Blueprint("audit", __name__, url_prefix="/audit")


@bp.get("")
@role_required(OPERATOR)
def index():
    raw_before = request.args.get("before", "")
    before = int(raw_before) if raw_before.isdigit() else None
    page = audit_store.audit_page(db.session, before=before)
    return render_template("audit/index.html", page=page)


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)
